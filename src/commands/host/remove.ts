import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {hostLine} from '../../cli/hosts-render.js'
import {removeHost} from '../../engine/hosts/manage.js'

export default class HostRemove extends BaseCommand<typeof HostRemove> {
  static override description = `Remove a drained edge host from the kit.

The kit no longer deploys to it nor waits for it; the host keeps its scripts and data. Refused for a
host still active (drain it first) and for the kit's only host (\`host unpair\` instead).
Exit codes: 0 removed, 5 no such host, 6 not drained, the only host, or not paired.`
  static override examples = ['<%= config.bin %> host drain onprem:0123456789ab && <%= config.bin %> host remove onprem:0123456789ab']
  static override args = {host: Args.string({required: true, description: 'The host: its scope (onprem:<12 hex>), those 12 hex, or its management URL'})}
  static override enableJsonFlag = true

  async run() {
    const removed = await removeHost(await this.engine(), this.args.host)
    return this.respond(removed, () => `removed ${hostLine(removed.host)}`)
  }
}
