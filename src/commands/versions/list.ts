import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {versionsTable} from '../../cli/versions-render.js'
import {listWorkerVersions} from '../../engine/versions/queries.js'

export default class VersionsList extends BaseCommand<typeof VersionsList> {
  static override description = `List the versions of a Worker, newest first (wrangler versions list).

Each with its state, tag, author, size and message; * marks the version the Worker serves.
Name the Worker by department id, Worker id or script name. Exit codes: 0 listed, 5 not found.`
  static override examples = ['<%= config.bin %> versions list acme-sales', '<%= config.bin %> versions list acme-sales --json']
  static override args = {worker: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'})}
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const list = await listWorkerVersions(await this.engine(), this.args.worker)
    return this.respond(list, () => versionsTable(list.versions))
  }
}
