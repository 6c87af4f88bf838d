import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {deploymentsTable} from '../../cli/versions-render.js'
import {listDeployments} from '../../engine/versions/deployments.js'

export default class DeploymentsList extends BaseCommand<typeof DeploymentsList> {
  static override description = `List a Worker's deployments, newest first (wrangler deployments list).

Each deployment: when its deploy completed, its version and percentage, whether it was a deploy or a
rollback, who ran it and their message; * marks the one served now. Exit codes: 0 listed, 5 not found.`
  static override examples = ['<%= config.bin %> deployments list acme-sales', '<%= config.bin %> deployments list acme-sales --json']
  static override args = {worker: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'})}
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const result = await listDeployments(await this.engine(), this.args.worker)
    return this.respond(result, () => deploymentsTable(result.deployments))
  }
}
