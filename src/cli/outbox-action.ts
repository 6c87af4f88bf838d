// `outbox retry` and `outbox cancel`: the status view's row actions as commands, one shape for both.
import * as Args from '@oclif/core/args'
import {cancelOutboxRow, retryOutboxRow} from '../engine/status/actions.js'
import {BaseCommand} from './base-command.js'

export abstract class OutboxActionCommand extends BaseCommand<typeof OutboxActionCommand> {
  static override args = {
    id: Args.string({required: true, description: 'Outbox row id'}),
  }
  static override enableJsonFlag = true
  static override flags = {}

  protected abstract readonly action: 'retry' | 'cancel'

  async run() {
    const engine = await this.engine()
    const act = this.action === 'retry' ? retryOutboxRow : cancelOutboxRow
    const done = await act(engine, this.args.id, this.operator)
    return this.respond(done, () => done.message)
  }
}
