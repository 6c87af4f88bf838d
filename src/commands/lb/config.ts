import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {KitError} from '../../errors.js'
import {haproxyConfig} from '../../engine/hosts/haproxy.js'
import {writeFileAtomically} from '../../util/atomic-file.js'

export default class LbConfig extends BaseCommand<typeof LbConfig> {
  static override description = `Write a load balancer configuration for the kit's active edge hosts.

--haproxy: every active host as a server, health-checked on its data plane's /readyz (a host
restarting with stale code, or drained, gets no traffic); idempotent requests that meet a dead host
are retried on another (retry-on, option redispatch); WebSocket upgrades pass through (timeout tunnel).
Regenerate and reload HAProxy after \`host pair --add\`, \`host drain\` or \`host remove\`.
Exit codes: 0 written, 2 bad flags, 5 no active host with a known address, 6 not paired.`
  static override examples = [
    '<%= config.bin %> lb config --haproxy --bind 0.0.0.0:80 --out /etc/haproxy/haproxy.cfg && systemctl reload haproxy',
    '<%= config.bin %> lb config --haproxy --json',
  ]
  static override enableJsonFlag = true
  static override flags = {
    haproxy: Flags.boolean({required: true, description: 'HAProxy (the one load balancer supported)'}),
    bind: Flags.string({default: '127.0.0.1:8080', description: 'Where HAProxy listens, HOST:PORT'}),
    'check-interval-ms': Flags.integer({default: 1000, min: 100, max: 60_000, description: 'How often HAProxy checks each host'}),
    out: Flags.string({description: 'Write the configuration to this file (default: print it)'}),
  }

  async run() {
    if (!/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.*-]+):\d{1,5}$/.test(this.flags.bind))
      throw new KitError('usage', `--bind ${JSON.stringify(this.flags.bind)} is not HOST:PORT`)
    const config = await haproxyConfig(await this.engine(), {bind: this.flags.bind, checkIntervalMs: this.flags['check-interval-ms']})
    if (this.flags.out) await writeFileAtomically(this.flags.out, config.text)
    return this.respond({...config, file: this.flags.out ?? null}, () =>
      this.flags.out
        ? [
            `wrote ${this.flags.out}: ${config.servers.length} host(s) of kit ${config.kit}`,
            ...config.skipped.map((host) => `skipped ${host}: data-plane address unknown`),
          ].join('\n')
        : config.text.trimEnd(),
    )
  }
}
