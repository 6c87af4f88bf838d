import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {deploymentsTable} from '../../cli/versions-render.js'
import {deploymentStatus} from '../../engine/versions/deployments.js'

export default class DeploymentsStatus extends BaseCommand<typeof DeploymentsStatus> {
  static override description = `Show the deployment a Worker serves now (wrangler deployments status).

Its version(s) and percentage, when it was deployed, by whom and why. Exit codes: 0 shown (also when the
Worker serves nothing: never deployed or retired), 5 not found.`
  static override examples = ['<%= config.bin %> deployments status acme-sales', '<%= config.bin %> deployments status acme-sales --json']
  static override args = {worker: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'})}
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const result = await deploymentStatus(await this.engine(), this.args.worker)
    return this.respond(result, () => (result.deployment ? deploymentsTable([result.deployment]) : `the Worker of ${result.departmentId} serves no deployment`))
  }
}
