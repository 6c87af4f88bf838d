import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {deployExitCode} from '../../cli/exit-codes.js'
import {withProgress} from '../../cli/progress.js'
import {redeployLines} from '../../cli/versions-render.js'
import {deployVersions} from '../../engine/versions/deploy-versions.js'

export default class VersionsDeploy extends BaseCommand<typeof VersionsDeploy> {
  static override description = `Serve stored versions of a Worker (wrangler versions deploy <version>@<percentage>…).

Name each version by id, unique prefix or tag, with its percentage (the % optional); one or two
versions, adding up to 100. Nothing is rebuilt: a new version carrying the deployment goes through the
same deploy task as deploy and rollback; the audit row is edge_worker.deployment_changed. A split (a
gradual deployment, A@90 B@10) keeps one of the versions the Worker serves now and uploads the other;
the host splits requests by the percentages, keeps a Cloudflare-Workers-Version-Key on one version and
honours Cloudflare-Workers-Version-Overrides. Both versions reach the Worker's KV, D1, R2 and queues
(its data, whatever the version); each serves its own static assets; queue() and scheduled() run on the
uploaded one. A Worker with Durable Objects keeps one version.

Exit codes: as deploy — 0 completed, 7 deferred or left to a later pass, 8 failed, 9 uncertain, 6
superseded, refused by a gate, the Worker retired or the version's artifacts missing; 2 bad
<version>@<percentage>, percentages not adding up to 100, a split refused, the deployment already
current or an ambiguous name; 5 unknown department or version.`
  static override examples = [
    '<%= config.bin %> versions deploy acme-sales v1.1@100',
    '<%= config.bin %> versions deploy acme-sales 3f2b9c1e@100% --message "back to the March build" --json',
    '<%= config.bin %> versions deploy acme-sales v1.1@90 v1.2@10',
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
