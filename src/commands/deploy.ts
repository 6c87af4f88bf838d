import {Args, Flags} from '@oclif/core'
import {Listr} from 'listr2'
import {BaseCommand} from '../cli/base-command.js'
import {progressRenderer} from '../cli/progress.js'
import {ExitCode} from '../cli/exit-codes.js'
import {deployWorker, type DeployOutcome} from '../engine/deploy/deploy-worker.js'

export default class Deploy extends BaseCommand<typeof Deploy> {
  static override description = `Build a Worker project into a version, enqueue its deploy and (by default) run it now.

The project directory holds edgeworker.json (main module, modules, compatibility date, builder policy,
static data, dependencies). Exit codes: 0 completed, 7 deferred or left to a later pass, 8 failed,
9 uncertain, 2 bad project, 5 unknown department, 6 refused by a gate or superseded (a newer deploy
of the same Worker wins).`
  static override examples = [
    '<%= config.bin %> deploy ./my-worker --department acme-sales',
    '<%= config.bin %> deploy ./my-worker --department acme-sales --no-wait',
    '<%= config.bin %> deploy ./my-worker --department acme-sales --json',
  ]
  static override args = {
    'project-dir': Args.directory({required: true, exists: true, description: 'Worker project directory (holds edgeworker.json)'}),
  }
  static override flags = {
    department: Flags.string({required: true, description: 'Department id whose Worker this is'}),
    wait: Flags.boolean({default: true, allowNo: true, description: 'Run the deploy task now and wait for it (--no-wait leaves it to the next pass)'}),
    'operation-settings-digest': Flags.string({description: 'SHA-256 (64 hex) of the operation settings this deploy carries'}),
    json: Flags.boolean({description: 'Print the result as JSON'}),
  }

  async run(): Promise<void> {
    const json = this.flags.json
    const engine = await this.engine({interactive: !json})
    let outcome: DeployOutcome | undefined
    const tasks = new Listr(
      [
        {
          title: 'Deploy',
          task: async (_ctx, task) => {
            outcome = await deployWorker(
              engine,
              {
                projectDir: this.args['project-dir'],
                departmentId: this.flags.department,
                wait: this.flags.wait,
                operationSettingsDigest: this.flags['operation-settings-digest'],
              },
              {
                onStage: (stage) => {
                  task.output = stage
                },
              },
            )
            task.title = `Deploy: ${outcome.state}`
          },
          rendererOptions: {outputBar: 1},
        },
      ],
      {renderer: progressRenderer(json), exitOnError: true},
    )
    await tasks.run()
    const result = outcome!
    this.emit(result, () =>
      [
        `worker       ${result.scriptName}`,
        `version      ${result.versionId}${result.reused ? ' (reused: same release generation)' : ''}`,
        `generation   ${result.releaseGeneration}`,
        `state        ${result.state}${result.code ? ` (${result.code})` : ''}`,
        ...(result.message ? [`detail       ${result.message}`] : []),
        ...(result.url ? [`url          ${result.url}`] : []),
        `outbox row   ${result.outboxId}${result.duplicate ? ' (duplicate enqueue: existing row)' : ''}`,
      ].join('\n'),
    )
    const exitFor: Record<DeployOutcome['state'], number> = {
      completed: ExitCode.ok,
      superseded: ExitCode.refused,
      deferred: ExitCode.pending,
      pending: ExitCode.pending,
      failed: ExitCode.failed,
      uncertain: ExitCode.uncertain,
    }
    if (exitFor[result.state] !== ExitCode.ok) this.exit(exitFor[result.state])
  }
}
