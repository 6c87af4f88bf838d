import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {pairKit} from '../../engine/pairing.js'

export default class HostPair extends BaseCommand<typeof HostPair> {
  static override description = `Pair the store with an edge host, using the one-time code the host printed.

Stores the host URL, its key fingerprint and a shared secret (never printed) and derives the kit
scope onprem:<12 hex>. Pairing another host is refused (before the code is spent) unless --add,
which makes it one more host of the kit (docs/many-hosts.md: every Worker runs on every host; the
next reconcile pass brings the new host current before it says ready), or --replace, which moves the
Workers and unfinished outbox rows of the current host to the new one and closes its restore gate
until a reconcile pass has redeployed them there.
Exit codes: 0 paired, 2 bad URL or --add with --replace, 6 code refused, already paired with another host, or the host belongs to another kit, 10 host unreachable.`
  static override examples = [
    '<%= config.bin %> host pair http://127.0.0.1:8788 --code 7F3K-Q9WZ-2M4T',
    '<%= config.bin %> host pair http://edge-01.internal:8788 --code "$(ssh edge-01 edgeworkers host pairing-code --data-dir /var/lib/edgeworkers)"',
    '<%= config.bin %> host pair http://edge-02.internal:8788 --code 7F3K-Q9WZ-2M4T --replace && <%= config.bin %> reconcile',
    '<%= config.bin %> host pair http://edge-03.internal:8788 --code 7F3K-Q9WZ-2M4T --add && <%= config.bin %> reconcile',
  ]
  static override args = {
    'management-url': Args.string({required: true, description: 'The edge host management listener, e.g. http://127.0.0.1:8788'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    code: Flags.string({required: true, description: 'One-time pairing code (edgeworkers host pairing-code on the host prints it)'}),
    replace: Flags.boolean({description: 'Replace the host the store is paired with: its Workers are redeployed to this one by the next reconcile pass'}),
    add: Flags.boolean({description: "Add this host to the kit's hosts: the next reconcile pass deploys every Worker to it"}),
  }

  async run() {
    const {pairing, replaced, joined} = await pairKit(await this.engine(), this.args['management-url'], this.flags.code, {
      replace: this.flags.replace,
      add: this.flags.add,
    })
    return this.respond({...pairing, replaced, joined}, () =>
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
        ...(joined
          ? [
              `kit          ${joined.kitScope}, now ${joined.hosts} hosts`,
              'next         run `edgeworkers reconcile`: it deploys every Worker here, then confirms the host ready; then `edgeworkers lb config --haproxy`',
            ]
          : []),
      ].join('\n'),
    )
  }
}
