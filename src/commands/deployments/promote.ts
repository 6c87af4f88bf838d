import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {deployExitCode} from '../../cli/exit-codes.js'
import {withProgress} from '../../cli/progress.js'
import {redeployLines} from '../../cli/versions-render.js'
import {promoteSplit} from '../../engine/versions/deploy-versions.js'

export default class DeploymentsPromote extends BaseCommand<typeof DeploymentsPromote> {
  static override description = `Finish a gradual deployment: its current version at 100 % (wrangler versions deploy <new>@100).

The same as versions deploy <current version>@100: a new version through the deploy task, audit row
edge_worker.deployment_changed. To go back to the old version instead, run rollback.

Exit codes: as deploy — 0 completed, 7 deferred or left to a later pass, 8 failed, 9 uncertain, 6
superseded or refused by a gate; 2 no split is live; 5 unknown department.`
  static override examples = [
    '<%= config.bin %> deployments promote acme-sales',
    '<%= config.bin %> deployments promote acme-sales --message "10 % looked fine" --json',
  ]
  static override args = {department: Args.string({required: true, description: 'Department id whose Worker to promote'})}
  static override enableJsonFlag = true
  static override flags = {
    message: Flags.string({description: 'Recorded on the new version (default: promote <id> to 100 %)'}),
    wait: Flags.boolean({default: true, allowNo: true, description: 'Run the deploy task now and wait for it (--no-wait leaves it to the next pass)'}),
  }

  async run() {
    const json = this.jsonEnabled()
    const engine = await this.engine({interactive: !json})
    const request = {departmentId: this.args.department, message: this.flags.message, wait: this.flags.wait, actor: this.operator}
    const result = await withProgress(
      'Promote',
      json,
      (report) => promoteSplit(engine, request, {onStage: report}),
      (outcome) => `Promote: ${outcome.state}`,
    )
    return this.respond(result, () => redeployLines(result, 'promote of'), deployExitCode[result.state])
  }
}
