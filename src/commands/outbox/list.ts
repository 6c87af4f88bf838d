import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {isoTime, table} from '../../cli/table.js'
import {listOutboxRows} from '../../engine/status/actions.js'
import {OUTBOX_OPERATIONS, OUTBOX_STATUSES} from '../../store/schema.js'

export default class OutboxList extends BaseCommand<typeof OutboxList> {
  static override description = 'List outbox rows (deploys, artifact cleanups, control audits), newest first.'
  static override examples = [
    '<%= config.bin %> outbox list',
    '<%= config.bin %> outbox list --status failed --operation deploy',
    '<%= config.bin %> outbox list --error-code edge_host_fenced --json',
  ]
  static override enableJsonFlag = true
  static override flags = {
    status: Flags.option({options: OUTBOX_STATUSES, description: 'Only rows in this status'})(),
    operation: Flags.option({options: OUTBOX_OPERATIONS, description: 'Only rows of this operation'})(),
    'error-code': Flags.string({description: 'Only rows whose last error code is this (e.g. edge_host_fenced)'}),
    scope: Flags.string({description: 'Only rows enqueued for this kit scope (onprem:<12 hex>)'}),
    worker: Flags.string({description: 'Only rows of this Worker id'}),
    limit: Flags.integer({min: 1, max: 10_000, default: 50, description: 'At most this many rows'}),
  }

  async run() {
    const rows = await listOutboxRows(await this.engine(), {
      status: this.flags.status,
      operation: this.flags.operation,
      errorCode: this.flags['error-code'],
      scope: this.flags.scope,
      workerId: this.flags.worker,
      limit: this.flags.limit,
    })
    return this.respond(rows, () =>
      table(
        ['ID', 'OPERATION', 'STATUS', 'ATTEMPTS', 'WAITS', 'SCRIPT', 'NEXT ATTEMPT', 'LAST ERROR CODE', 'CREATED'],
        rows.map((r) => [
          r.id,
          r.operation,
          r.status,
          String(r.attempts),
          String(r.waits),
          r.script_name ?? '-',
          isoTime(r.next_attempt_at),
          r.last_error_code ?? '-',
          isoTime(r.created_at),
        ]),
        'no outbox rows',
      ),
    )
  }
}
