import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {diffText} from '../../cli/versions-render.js'
import {diffWorkerVersions} from '../../engine/versions/diff.js'

export default class VersionsDiff extends BaseCommand<typeof VersionsDiff> {
  static override description = `What changed from version A to version B of a Worker.

Modules (by content digest), bindings, vars, compatibility date and flags, static assets (config and
files) and the rest of the manifest (main, builder policy, crons, static data, dependencies): + added,
- removed, ~ changed. Exit codes: 0 compared, 2 ambiguous prefix, 5 Worker or version not found.`
  static override examples = ['<%= config.bin %> versions diff acme-sales v1.0 v1.1', '<%= config.bin %> versions diff acme-sales 3f2b 9c1e --json']
  static override args = {
    worker: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'}),
    from: Args.string({required: true, description: 'Version A: id, unique id prefix or tag'}),
    to: Args.string({required: true, description: 'Version B: id, unique id prefix or tag'}),
  }
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const diff = await diffWorkerVersions(await this.engine(), this.args.worker, this.args.from, this.args.to)
    return this.respond(diff, () => diffText(diff))
  }
}
