import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {hostLine} from '../../cli/hosts-render.js'
import {drainHost} from '../../engine/hosts/manage.js'

export default class HostDrain extends BaseCommand<typeof HostDrain> {
  static override description = `Take an edge host of the kit out of the load balancer.

The host answers /readyz 503 at once (HAProxy stops sending it new requests), keeps serving what
reaches it, and keeps taking deploys without holding them up. A host that is down is drained in the
store and told when it can be. Then \`host remove\` ends its membership.
Exit codes: 0 drained, 5 no such host, 6 already draining or not paired.`
  static override examples = ['<%= config.bin %> host drain onprem:0123456789ab', '<%= config.bin %> host drain http://edge-02.internal:8788 --json']
  static override args = {host: Args.string({required: true, description: 'The host: its scope (onprem:<12 hex>), those 12 hex, or its management URL'})}
  static override enableJsonFlag = true

  async run() {
    const drained = await drainHost(await this.engine(), this.args.host)
    return this.respond(drained, () =>
      [`drained ${hostLine(drained.host)}`, drained.told ? 'the host answers /readyz 503 now' : `the host was not told (${drained.error})`].join('\n'),
    )
  }
}
