import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../cli/base-command.js'
import {deployExitCode} from '../cli/exit-codes.js'
import {withProgress} from '../cli/progress.js'
import {redeployLines} from '../cli/versions-render.js'
import {rollbackWorker} from '../engine/deploy/rollback.js'

export default class Rollback extends BaseCommand<typeof Rollback> {
  static override description = `Deploy a stored version of a Worker again, without rebuilding (wrangler's rollback).

The rollback is a new version, the newest, carrying the target's artifacts: it wins over anything older
and runs through the same deploy task as deploy. Default target: the version deployed before the current one;
while a gradual deployment is live, the version it keeps beside the current one (the old one, at 100 %).

Exit codes: as deploy — 0 completed, 7 deferred or left to a later pass, 8 failed, 9 uncertain, 6
superseded, refused by a gate, the Worker retired or the target's artifacts missing; 2 target already
current or an ambiguous --to; 5 unknown department, no earlier deployed version or unknown --to.`
  static override examples = [
    '<%= config.bin %> rollback acme-sales',
    '<%= config.bin %> rollback acme-sales --to v1.0 --message "v1.1 breaks checkout"',
    '<%= config.bin %> rollback acme-sales --to 3f2b9c1e --no-wait --json',
  ]
  static override args = {department: Args.string({required: true, description: 'Department id whose Worker to roll back'})}
  static override enableJsonFlag = true
  static override flags = {
    to: Flags.string({description: 'Version id (or a unique prefix) or tag to roll back to'}),
    message: Flags.string({description: 'Recorded on the rollback version (default: rollback to <id>)'}),
    wait: Flags.boolean({default: true, allowNo: true, description: 'Run the deploy task now and wait for it (--no-wait leaves it to the next pass)'}),
  }

  async run() {
    const json = this.jsonEnabled()
    const engine = await this.engine({interactive: !json})
    const request = {departmentId: this.args.department, to: this.flags.to, message: this.flags.message, wait: this.flags.wait, actor: this.operator}
    const result = await withProgress(
      'Rollback',
      json,
      (report) => rollbackWorker(engine, request, {onStage: report}),
      (outcome) => `Rollback: ${outcome.state}`,
    )
    return this.respond(result, () => redeployLines(result, 'rollback to'), deployExitCode[result.state])
  }
}
