import {Flags} from '@oclif/core'
import {BaseCommand} from '../cli/base-command.js'
import {withProgress} from '../cli/progress.js'
import {ExitCode} from '../cli/exit-codes.js'
import {republishLine} from '../cli/fence-render.js'
import {republishDeferred} from '../engine/fence/lifecycle.js'

export default class Republish extends BaseCommand<typeof Republish> {
  static override description = `Republish the deploys a backup fence deferred, now (the deferred lane of \`reconcile\`, alone).

Rows marked edge_host_fenced run oldest first, each at most once per 15 s cooldown; the marker is
cleared once a dispatch is accepted. A fence the host already lifted is confirmed first. While a
fence is still open nothing runs. Exit codes: 0 ran (or nothing to do); 7 the fence is still open;
12 the lane raised an error.`
  static override examples = ['<%= config.bin %> republish', '<%= config.bin %> republish --json']
  static override flags = {
    json: Flags.boolean({description: 'Print the lane summary as JSON'}),
  }

  async run(): Promise<void> {
    const json = this.flags.json
    const engine = await this.engine({interactive: !json})
    let done = 0
    const result = await withProgress(
      'Republish deferred deploys',
      json,
      (report) =>
        republishDeferred(engine, {
          onRowDone: (event) => {
            done += 1
            report(`${done} done — ${event.scriptName ?? event.rowId}: ${event.outcome}`)
          },
        }),
      republishLine,
    )
    this.emit(result, () => republishLine(result))
    if (result.error) this.exit(ExitCode.laneError)
    if (result.skippedReason) this.exit(ExitCode.pending)
  }
}
