import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {deployExitCode} from '../../cli/exit-codes.js'
import {withProgress} from '../../cli/progress.js'
import {redeployLines} from '../../cli/versions-render.js'
import {deployVersions} from '../../engine/versions/deploy-versions.js'

export default class VersionsDeploy extends BaseCommand<typeof VersionsDeploy> {
  static override description = `Serve a stored version of a Worker (wrangler versions deploy <version>@<percentage>).

Name each version by id, unique prefix or tag, with its percentage (the % optional). One version at 100
is deployed again without rebuilding, as a new version through the same deploy task as rollback; the
audit row is edge_worker.deployment_changed. A split of two versions (A@90 B@10) is checked by
Cloudflare's rules — a Worker with Durable Objects, or KV, D1, R2 or queues (kept in its Durable Object
storage), keeps one version — and then refused: this host serves one version of a Worker at a time.

Exit codes: as deploy — 0 completed, 7 deferred or left to a later pass, 8 failed, 9 uncertain, 6
superseded, refused by a gate, a split, the Worker retired or the version's artifacts missing; 2 bad
<version>@<percentage>, the version already current or an ambiguous name; 5 unknown department or version.`
  static override examples = [
    '<%= config.bin %> versions deploy acme-sales v1.1@100',
    '<%= config.bin %> versions deploy acme-sales 3f2b9c1e@100% --message "back to the March build" --json',
  ]
  static override strict = false
  static override args = {department: Args.string({required: true, description: 'Department id whose Worker to deploy'})}
  static override enableJsonFlag = true
  static override flags = {
    message: Flags.string({description: 'Recorded on the new version (default: deploy of <id>)'}),
    wait: Flags.boolean({default: true, allowNo: true, description: 'Run the deploy task now and wait for it (--no-wait leaves it to the next pass)'}),
  }

  async run() {
    const json = this.jsonEnabled()
    const engine = await this.engine({interactive: !json})
    const specs = this.positionals.slice(1)
    const request = {departmentId: this.args.department, specs, message: this.flags.message, wait: this.flags.wait, actor: this.operator}
    const result = await withProgress(
      'Deploy',
      json,
      (report) => deployVersions(engine, request, {onStage: report}),
      (outcome) => `Deploy: ${outcome.state}`,
    )
    return this.respond(result, () => redeployLines(result, 'deploy of'), deployExitCode[result.state])
  }
}
