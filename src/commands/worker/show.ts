import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {fields, isoTime, table} from '../../cli/table.js'
import {showWorker} from '../../engine/workers.js'

export default class WorkerShow extends BaseCommand<typeof WorkerShow> {
  static override description = `Show one Edge Worker, where it answers, and its versions.

Name it by department id, Worker id or script name. Exit codes: 0 shown, 5 not found.`
  static override examples = [
    '<%= config.bin %> worker show acme-sales',
    '<%= config.bin %> worker show 3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f',
    '<%= config.bin %> worker show dw-0123456789abcdef0123456789abcdef0123456789abcdef --json',
  ]
  static override args = {
    worker: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'}),
  }
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const details = await showWorker(await this.engine(), this.args.worker)
    const {worker, versions} = details
    return this.respond(details, () =>
      [
        fields([
          ['id', worker.id],
          ['script', worker.script_name],
          ['company', worker.company_id],
          ['department', worker.department_id],
          ['status', worker.status],
          ['current version', worker.current_version_id ?? '-'],
          ['serving scope', worker.serving_scope ?? '-'],
          ['url', details.url ?? '-'],
          ['base revision', String(worker.base_revision)],
          ['created', isoTime(worker.created_at)],
          ['retired', isoTime(worker.retired_at)],
        ]),
        '',
        table(
          ['VERSION', 'STATE', 'RELEASE GENERATION', 'BUILDER POLICY', 'CREATED'],
          versions.map((v) => [v.id, v.state, v.release_generation, v.builder_policy, isoTime(v.created_at)]),
          'no versions',
        ),
      ].join('\n'),
    )
  }
}
