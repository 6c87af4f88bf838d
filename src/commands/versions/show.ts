import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {versionFields} from '../../cli/versions-render.js'
import {showWorkerVersion} from '../../engine/versions/queries.js'

export default class VersionsShow extends BaseCommand<typeof VersionsShow> {
  static override description = `Show one version of a Worker (wrangler versions view).

Its message, tag, author, state, source, size, digests, compatibility and modules. Name the version by
id, a unique prefix of at least 4 characters, or tag. Exit codes: 0 shown, 2 ambiguous prefix, 5 not found.`
  static override examples = ['<%= config.bin %> versions show acme-sales v1.2', '<%= config.bin %> versions show acme-sales 3f2b9c1e --json']
  static override args = {
    worker: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'}),
    version: Args.string({required: true, description: 'Version id, unique id prefix or tag'}),
  }
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const details = await showWorkerVersion(await this.engine(), this.args.worker, this.args.version)
    return this.respond(details, () => versionFields(details))
  }
}
