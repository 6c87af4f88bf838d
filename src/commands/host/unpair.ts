import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {unpairKit} from '../../engine/pairing.js'

export default class HostUnpair extends BaseCommand<typeof HostUnpair> {
  static override description = `End the store's pairing with its edge host (the only one, or the scope named).

The store forgets the shared secret's use: passes skip, deploys and controls are refused (exit 6)
until it is paired again; its Workers, versions and outbox rows stay. The host keeps its side; run
\`edgeworkers host pairing-code --rotate\` there to issue a new code. To move the Workers to another
host instead, pair that one with \`host pair --replace\`.
Exit codes: 0 unpaired, 2 several pairings and no scope named, 5 not paired.`
  static override examples = ['<%= config.bin %> host unpair', '<%= config.bin %> host unpair onprem:0123456789ab --json']
  static override args = {scope: Args.string({required: false, description: 'The scope to unpair (default: the only one)'})}
  static override enableJsonFlag = true

  async run() {
    const pairing = await unpairKit(await this.engine(), this.args.scope)
    return this.respond(pairing, () => `unpaired ${pairing.scope} (${pairing.host_url})`)
  }
}
