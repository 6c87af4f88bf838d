import {BaseCommand} from '../../cli/base-command.js'
import {hostLine} from '../../cli/hosts-render.js'
import {listKitHosts} from '../../engine/hosts/manage.js'

export default class HostList extends BaseCommand<typeof HostList> {
  static override description = `List the kit's edge hosts: state (active | draining), health and lag, as the store knows them.

Health: current (confirmed serving every current release), behind (missed a change while down;
the next reconcile pass catches it up), unreachable (did not answer the kit's last call),
unconfirmed (joined, not yet confirmed). Lag: the kit's Workers whose current release the host has
not been confirmed to serve. See docs/many-hosts.md.
Exit codes: 0 listed, 6 not paired.`
  static override examples = ['<%= config.bin %> host list', '<%= config.bin %> host list --json']
  static override enableJsonFlag = true

  async run() {
    const listing = await listKitHosts(await this.engine())
    return this.respond(listing, () => [`kit ${listing.kit}`, ...listing.hosts.map(hostLine)].join('\n'))
  }
}
