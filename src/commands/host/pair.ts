import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {pairKit} from '../../engine/pairing.js'

export default class HostPair extends BaseCommand<typeof HostPair> {
  static override description = `Pair the store with an edge host, using the one-time code the host printed.

Stores the host URL, its key fingerprint and a shared secret (never printed) and derives the kit
scope onprem:<12 hex>. Exit codes: 0 paired, 2 bad URL, 6 code refused, 10 host unreachable.`
  static override examples = [
    '<%= config.bin %> host pair http://127.0.0.1:8788 --code 7F3K-Q9WZ-2M4T',
    '<%= config.bin %> host pair http://edge-01.internal:8788 --code "$(ssh edge-01 edgeworkers host pairing-code --data-dir /var/lib/edgeworkers)"',
  ]
  static override args = {
    'management-url': Args.string({required: true, description: 'The edge host management listener, e.g. http://127.0.0.1:8788'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    code: Flags.string({required: true, description: 'One-time pairing code (edgeworkers host pairing-code on the host prints it)'}),
  }

  async run() {
    const saved = await pairKit(await this.engine(), this.args['management-url'], this.flags.code)
    return this.respond(saved, () => [`paired with ${saved.host_url}`, `scope        ${saved.scope}`, `fingerprint  ${saved.host_fingerprint}`].join('\n'))
  }
}
