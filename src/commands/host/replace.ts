import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {replaceHost} from '../../engine/hosts/replace.js'

export default class HostReplace extends BaseCommand<typeof HostReplace> {
  static override description = `Replace an edge host of the kit with a new machine.

Pairs the new host into the kit, moves every stateful Worker the old host owns to it (data copied
inside a fence, as \`worker move\` does), brings the new host current, then drains and removes the
old one. Re-run the same command after a crash: it continues where it stopped (the code is spent
once; a host already paired is not paired again). Regenerate the load balancer's configuration
afterwards (\`lb config --haproxy\`).
Exit codes: 0 replaced, 2 bad URL, 5 no such host, 6 code refused or a move refused, 10 a host did not answer.`
  static override examples = ['<%= config.bin %> host replace onprem:0123456789ab http://edge-04.internal:8788 --code 7F3K-Q9WZ-2M4T']
  static override args = {
    old: Args.string({required: true, description: 'The host to replace: its scope (onprem:<12 hex>), those 12 hex, or its management URL'}),
    url: Args.string({required: true, description: "The new host's management URL"}),
  }
  static override enableJsonFlag = true
  static override flags = {
    code: Flags.string({required: true, description: 'One-time pairing code of the new host (edgeworkers host pairing-code on it prints it)'}),
  }

  async run() {
    const replaced = await replaceHost(await this.engine(), this.args.old, this.args.url, this.flags.code)
    return this.respond(replaced, () =>
      [
        `replaced ${replaced.old} with ${replaced.new}${replaced.paired ? '' : ' (already paired)'}`,
        ...replaced.moved.map((move) => `moved ${move.scriptName} (${move.files} data file(s))`),
        `${replaced.old} drained and removed`,
      ].join('\n'),
    )
  }
}
