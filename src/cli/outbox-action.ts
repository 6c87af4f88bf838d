// `outbox retry` and `outbox cancel`: the status view's row actions as commands, one shape for both.
import {Args, Flags} from '@oclif/core'
import {engineStatusSource} from '../engine/status/source.js'
import {BaseCommand} from './base-command.js'

export abstract class OutboxActionCommand extends BaseCommand<typeof OutboxActionCommand> {
  static override args = {
    id: Args.string({required: true, description: 'Outbox row id'}),
  }
  static override flags = {
    json: Flags.boolean({description: 'Print the result as JSON'}),
  }

  protected abstract readonly action: 'retry' | 'cancel'

  async run(): Promise<void> {
    const engine = await this.engine()
    const source = engineStatusSource(async () => engine, this.operator)
    const done = await source[this.action](this.args.id)
    this.emit(done, () => done.message)
  }
}
