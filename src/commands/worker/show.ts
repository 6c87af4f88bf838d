import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../cli/base-command.js'
import {fields, isoTime, table} from '../../cli/table.js'
import {KitError} from '../../errors.js'
import {SCRIPT_NAME_PATTERN} from '../../store/index.js'

export default class WorkerShow extends BaseCommand<typeof WorkerShow> {
  static override description = 'Show one Edge Worker and its versions.'
  static override examples = [
    '<%= config.bin %> worker show 3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f',
    '<%= config.bin %> worker show dw-0123456789abcdef0123456789abcdef0123456789abcdef --json',
  ]
  static override args = {
    worker: Args.string({required: true, description: 'Worker id or script name (dw-…)'}),
  }
  static override flags = {
    json: Flags.boolean({description: 'Print {worker, versions} as JSON'}),
  }

  async run(): Promise<void> {
    const store = await this.store()
    const key = this.args.worker
    const worker = SCRIPT_NAME_PATTERN.test(key) ? await store.workers.getByScriptName(key) : await store.workers.get(key)
    if (!worker) throw new KitError('not_found', `Worker ${key} not found`)
    const versions = await store.workers.listVersions(worker.id)
    this.emit({worker, versions}, () =>
      [
        fields([
          ['id', worker.id],
          ['script', worker.script_name],
          ['company', worker.company_id],
          ['department', worker.department_id],
          ['status', worker.status],
          ['current version', worker.current_version_id ?? '-'],
          ['serving scope', worker.serving_scope ?? '-'],
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
