import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {createLogger, resolveLogFormat} from '../../cli/logger.js'
import {notifySystemd} from '../../cli/systemd-notify.js'
import {startHost} from '../../edge-host/host.js'

export default class HostServe extends BaseCommand<typeof HostServe> {
  static override description = `Run the edge host: Worker scripts on workerd shards behind a data-plane listener and a paired, signed management API.

Both listeners are loopback by default; port 0 picks a free port. The chosen addresses are logged and
written to <data-dir>/host.json. The first start creates the host's identity key and prints a one-time
pairing code (\`host pairing-code\` prints it again). Logs go to stdout: JSON lines, or human lines in a terminal (--log-format).
Under systemd (Type=notify) it sends READY=1 once every shard serves, through systemd-notify. SIGTERM or SIGINT:
stop accepting, drain in-flight requests, stop workerd, exit 143 (SIGTERM) or 130 (SIGINT).

Settings under [host] (listen, admin_listen, base_domain, shards, max_scripts_per_shard, ...) come from
the config file and EDGEWORKERS_HOST__* variables; the flags below override them. Run it as its own user
under systemd sandboxing: workerd is not a hardened sandbox.`
  static override examples = [
    '<%= config.bin %> host serve --data-dir /var/lib/edgeworkers-host',
    '<%= config.bin %> host serve --data-dir ./host --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0',
    '<%= config.bin %> host serve --data-dir ./host --listen 0.0.0.0:8787 --base-domain workers.example.internal',
    '<%= config.bin %> host serve --data-dir ./host --experimental',
  ]
  static override flags = {
    listen: Flags.string({description: 'Data-plane address HOST:PORT (setting host.listen, default 127.0.0.1:8787)'}),
    'admin-listen': Flags.string({description: 'Management address HOST:PORT (setting host.admin_listen, default 127.0.0.1:8788)'}),
    'base-domain': Flags.string({description: 'Workers also answer at <script>.<base domain> (setting host.base_domain)'}),
    experimental: Flags.boolean({
      description: 'Run workerd with --experimental so Workers may use flags workerd marks experimental (setting host.experimental, default off)',
    }),
  }

  protected override settingOverrides(): Record<string, unknown> {
    return {
      'host.listen': this.flags.listen,
      'host.admin_listen': this.flags['admin-listen'],
      'host.base_domain': this.flags['base-domain'],
      // Absent, the flag leaves the setting alone: only --experimental turns it on from the command line.
      'host.experimental': this.flags.experimental || undefined,
    }
  }

  async run() {
    const {settings} = this.loadSettings()
    const logger = await createLogger({
      level: settings.log_level,
      format: resolveLogFormat(settings.log_format, 1),
      fd: 1,
      base: {component: 'edge-host'},
    })
    const host = await startHost({dataDir: settings.data_dir, settings: settings.host, maxFenceTtlSeconds: settings.fence.max_ttl_seconds, logger})
    if (host.issuedPairingCode) {
      // Shown once, here; never logged. `host pairing-code` reads it from the data dir again.
      this.logToStderr(`pairing code: ${host.issuedPairingCode}  (edgeworkers host pair ${host.adminUrl} --code ${host.issuedPairingCode})`)
    }
    // Every shard serves once startHost returns: what /readyz answers 200 for, and what Type=notify waits for.
    await notifySystemd({READY: '1', STATUS: `serving on ${host.publicUrl}, management on ${host.adminUrl}`}, logger)
    await this.untilInterrupted()
    await notifySystemd({STOPPING: '1'}, logger)
    await host.stop()
  }

  protected override unwindsOnInterrupt(): boolean {
    return true
  }

  protected override interruptNote(): string {
    return 'the edge host stopped (requests drained, workerd stopped); `host serve` on the same data dir starts it again'
  }
}
