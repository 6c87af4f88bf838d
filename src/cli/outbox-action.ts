// `outbox retry` and `outbox cancel`: the status view's row actions as commands, one shape for both —
// one row by id (or a unique prefix), or every row a selection names (--status, --operation/--lane,
// --older-than).
import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {actOnOutboxRows, cancelOutboxRow, retryOutboxRow} from '../engine/status/actions.js'
import {KitError} from '../errors.js'
import {OUTBOX_OPERATIONS, OUTBOX_STATUSES} from '../store/schema.js'
import {BaseCommand} from './base-command.js'
import {ExitCode} from './exit-codes.js'
import {durationFlag} from './flags.js'

export abstract class OutboxActionCommand extends BaseCommand<typeof OutboxActionCommand> {
  static override args = {
    id: Args.string({required: false, description: 'Outbox row id, or a unique prefix of it (at least 4 characters)'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    status: Flags.option({options: OUTBOX_STATUSES, description: 'Every row in this status (instead of an id)'})(),
    operation: Flags.option({options: OUTBOX_OPERATIONS, aliases: ['lane'], description: 'Every row of this operation (its lane)'})(),
    'older-than': durationFlag({description: 'Only rows created at least this long ago (90s, 10m, 1h, 2d)'}),
  }

  protected abstract readonly action: 'retry' | 'cancel'

  async run() {
    const {status, operation} = this.flags
    const olderThanSeconds = this.flags['older-than']
    const selecting = status !== undefined || operation !== undefined || olderThanSeconds !== undefined
    if (this.args.id !== undefined && selecting) throw new KitError('usage', 'give an id or a selection (--status, --operation, --older-than), not both')
    if (this.args.id === undefined && !selecting)
      throw new KitError('usage', 'give an outbox row id, or select rows with --status, --operation or --older-than')
    const engine = await this.engine()
    if (this.args.id === undefined) {
      const done = await actOnOutboxRows(engine, this.action, {status, operation, olderThanSeconds}, this.operator)
      return this.respond(done, () => done.message, done.refused.length > 0 ? ExitCode.refused : ExitCode.ok)
    }
    const act = this.action === 'retry' ? retryOutboxRow : cancelOutboxRow
    const done = await act(engine, this.args.id, this.operator)
    return this.respond(done, () => done.message)
  }
}
