import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {fields, isoTime} from '../../cli/table.js'
import {outboxRowDetail} from '../../engine/status/actions.js'
import {KitError} from '../../errors.js'

export default class OutboxShow extends BaseCommand<typeof OutboxShow> {
  static override description = 'Show one outbox row, its lease and its payload.'
  static override examples = [
    '<%= config.bin %> outbox show 3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f',
    '<%= config.bin %> outbox show 3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f --json',
  ]
  static override args = {
    id: Args.string({required: true, description: 'Outbox row id, or a unique prefix of it (at least 4 characters)'}),
  }
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const row = await outboxRowDetail(await this.engine(), this.args.id)
    if (!row) throw new KitError('not_found', `outbox row ${this.args.id} not found`)
    return this.respond(row, () =>
      fields([
        ['id', row.id],
        ['operation', row.operation],
        ['status', row.status],
        ['dedupe key', row.dedupe_key],
        ['scope', row.dispatch_namespace],
        ['company', row.company_id ?? '-'],
        ['department', row.department_id ?? '-'],
        ['worker', row.worker_id ?? '-'],
        ['version', row.version_id ?? '-'],
        ['script', row.script_name ?? '-'],
        ['attempts', String(row.attempts)],
        ['waits', String(row.waits)],
        ['lease owner', row.lease_owner ?? '-'],
        ['lease expires', isoTime(row.lease_expires_at)],
        ['next attempt', isoTime(row.next_attempt_at)],
        ['last error code', row.last_error_code ?? '-'],
        ['last error', row.last_error ?? '-'],
        ['created', isoTime(row.created_at)],
        ['updated', isoTime(row.updated_at)],
        ['payload', JSON.stringify(row.payload)],
      ]),
    )
  }
}
