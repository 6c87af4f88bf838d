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
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const json = this.jsonEnabled()
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
    const exitCode = result.error ? ExitCode.laneError : result.skippedReason ? ExitCode.pending : ExitCode.ok
    return this.respond(result, () => republishLine(result), exitCode)
  }
}
