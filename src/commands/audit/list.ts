import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {isoTime, table} from '../../cli/table.js'
import {listAuditRows} from '../../engine/audit-log.js'

export default class AuditList extends BaseCommand<typeof AuditList> {
  static override description = 'List audit log rows, newest first.'
  static override examples = [
    '<%= config.bin %> audit list',
    '<%= config.bin %> audit list --action department.worker_retired',
    '<%= config.bin %> audit list --resource 3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f --json',
  ]
  static override enableJsonFlag = true
  static override flags = {
    action: Flags.string({description: 'Only rows with this action (e.g. service_account.deleted)'}),
    resource: Flags.string({description: 'Only rows about this resource id'}),
    'resource-type': Flags.string({description: 'Only rows about this resource type (e.g. edge_worker)'}),
    limit: Flags.integer({min: 1, max: 10_000, default: 50, description: 'At most this many rows'}),
  }

  async run() {
    const rows = await listAuditRows(await this.engine(), {
      action: this.flags.action,
      resourceId: this.flags.resource,
      resourceType: this.flags['resource-type'],
      limit: this.flags.limit,
    })
    return this.respond(rows, () =>
      table(
        ['CREATED', 'ACTION', 'RESOURCE', 'ACTOR', 'RESULT', 'REASON'],
        rows.map((r) => [
          isoTime(r.created_at),
          r.action,
          `${r.resource_type}/${r.resource_id}`,
          `${r.actor_type}${r.actor_id ? `:${r.actor_id}` : ''}`,
          r.result,
          r.reason_code ?? '-',
        ]),
        'no audit rows',
      ),
    )
  }
}
