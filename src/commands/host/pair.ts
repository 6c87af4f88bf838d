import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {pairKit} from '../../engine/pairing.js'

export default class HostPair extends BaseCommand<typeof HostPair> {
  static override description = `Pair the store with an edge host, using the one-time code the host printed.

Stores the host URL, its key fingerprint and a shared secret (never printed) and derives the kit
scope onprem:<12 hex>. A store serves one host: pairing another one is refused (before the code is
spent) unless --replace, which moves the Workers and unfinished outbox rows of the current host to
the new one and closes its restore gate until a reconcile pass has redeployed them there.
Exit codes: 0 paired, 2 bad URL, 6 code refused or already paired with another host, 10 host unreachable.`
  static override examples = [
    '<%= config.bin %> host pair http://127.0.0.1:8788 --code 7F3K-Q9WZ-2M4T',
    '<%= config.bin %> host pair http://edge-01.internal:8788 --code "$(ssh edge-01 edgeworkers host pairing-code --data-dir /var/lib/edgeworkers)"',
    '<%= config.bin %> host pair http://edge-02.internal:8788 --code 7F3K-Q9WZ-2M4T --replace && <%= config.bin %> reconcile',
  ]
  static override args = {
    'management-url': Args.string({required: true, description: 'The edge host management listener, e.g. http://127.0.0.1:8788'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    code: Flags.string({required: true, description: 'One-time pairing code (edgeworkers host pairing-code on the host prints it)'}),
    replace: Flags.boolean({description: 'Replace the host the store is paired with: its Workers are redeployed to this one by the next reconcile pass'}),
  }

  async run() {
    const {pairing, replaced} = await pairKit(await this.engine(), this.args['management-url'], this.flags.code, {replace: this.flags.replace})
    return this.respond({...pairing, replaced}, () =>
      [
        `paired with ${pairing.host_url}`,
        `scope        ${pairing.scope}`,
        `fingerprint  ${pairing.host_fingerprint}`,
        ...(replaced
          ? [
              `replaced     ${replaced.hostUrl} (${replaced.scope}): ${replaced.workers} Workers and ${replaced.rows} unfinished outbox rows moved`,
              'next         run `edgeworkers reconcile`: it redeploys the Workers here, then opens the restore gate',
            ]
          : []),
      ].join('\n'),
    )
  }
}
