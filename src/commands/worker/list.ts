import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {table} from '../../cli/table.js'
import {listWorkers} from '../../engine/workers.js'

export default class WorkerList extends BaseCommand<typeof WorkerList> {
  static override description = 'List Edge Workers (one per department), oldest first.'
  static override examples = ['<%= config.bin %> worker list', '<%= config.bin %> worker list --company acme --status paused --json']
  static override enableJsonFlag = true
  static override flags = {
    company: Flags.string({description: 'Only Workers of this company id'}),
    status: Flags.string({description: 'Only Workers in this status (e.g. active, paused, retired)'}),
  }

  async run() {
    const workers = await listWorkers(await this.engine(), {companyId: this.flags.company, status: this.flags.status})
    return this.respond(workers, () =>
      table(
        ['ID', 'SCRIPT', 'COMPANY', 'DEPARTMENT', 'STATUS', 'CURRENT VERSION'],
        workers.map((w) => [w.id, w.script_name, w.company_id, w.department_id, w.status, w.current_version_id ?? '-']),
        'no Workers',
      ),
    )
  }
}
