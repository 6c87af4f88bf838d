import path from 'node:path'
import * as Flags from '@oclif/core/flags'
import {FileArtifactStore} from '../artifacts/store.js'
import {BaseCommand} from '../cli/base-command.js'
import {durationFlag} from '../cli/flags.js'
import {ExitCode} from '../cli/exit-codes.js'
import {table} from '../cli/table.js'
import {formatDuration} from '../engine/status/snapshot.js'
import {assertMetricsFileWritable, LANE_NAMES, runPass, watchPasses, writeMetricsFile, type PassResult} from '../engine/pass/index.js'

export default class Reconcile extends BaseCommand<typeof Reconcile> {
  static override description = `Run one reconcile pass over the background lanes (or keep running them with --watch).

Lanes, in order: recovery (republish stalled and expired deploys), deferred (deploys held by a backup
fence), artifact_cleanup (orphaned artifacts), control_audit (control mutations settled from the host's
receipts, receipts acknowledged), host_reconcile (host retirements and fences). Each lane
has its own error boundary, batch cap and time budget; any number of passes may run at once, on one
machine or many, without handling a row twice. Schedule it with cron or the systemd timer in
deploy/systemd (docs/scheduling.md).

Exit codes: 0 the pass ran (whatever rows it retried); 11 skipped (the provider is invalid); 12 a lane
raised an error (the other lanes still ran); with --detailed-exitcode, 7 when rows of the swept lanes
are left failed or uncertain in scope. 2 bad flags or an unwritable --metrics-file; 4 the store is
unavailable. SIGINT or SIGTERM stops a pass from claiming more rows (those it started finish, the others are
given back) and --watch after its current pass; then it exits 130 (SIGINT) or 143 (SIGTERM).`
  static override examples = [
    '<%= config.bin %> reconcile',
    '<%= config.bin %> reconcile --lane recovery --lane deferred --json',
    '<%= config.bin %> reconcile --lane control_audit',
    '<%= config.bin %> reconcile --metrics-file /var/lib/node_exporter/textfile/edgeworkers.prom --detailed-exitcode',
    '<%= config.bin %> reconcile --watch --interval 15',
  ]
  static override enableJsonFlag = true
  static override flags = {
    lane: Flags.option({options: LANE_NAMES, multiple: true, description: 'Run only this lane (repeatable); default all'})(),
    watch: Flags.boolean({description: 'Keep running passes every --interval seconds, never two at once, until SIGINT/SIGTERM'}),
    interval: durationFlag({
      min: 1,
      max: 3_600,
      dependsOn: ['watch'],
      description: 'Time between pass starts with --watch: 15, 30s, 5m (1 s–1 h). Default: reconcile.watch_interval_seconds (60)',
    }),
    'metrics-file': Flags.string({description: 'Write a node_exporter textfile (.prom) after each pass, atomically'}),
    'detailed-exitcode': Flags.boolean({description: 'Exit 7 when rows of the swept lanes are left failed or uncertain in scope'}),
  }

  async run() {
    const metricsFile = this.flags['metrics-file'] ? path.resolve(this.flags['metrics-file']) : undefined
    if (metricsFile) await assertMetricsFileWritable(metricsFile)
    const engine = await this.engine()
    const passOptions = {
      lanes: this.flags.lane,
      signal: this.interrupted,
      openArtifactStore: () => FileArtifactStore.open(this.settings.data_dir),
    }
    if (this.flags.watch) {
      const intervalMs = (this.flags.interval ?? this.settings.reconcile.watch_interval_seconds) * 1000
      await watchPasses(engine, {
        ...passOptions,
        intervalMs,
        onPass: async (result) => {
          if (this.jsonEnabled()) this.printJsonLine(result)
          else this.log(renderPass(result))
          if (metricsFile) await writeMetricsFile(metricsFile, result)
        },
      })
      return undefined
    }
    const result = await runPass(engine, passOptions)
    if (metricsFile) await writeMetricsFile(metricsFile, result)
    return this.respond(result, () => renderPass(result), exitCodeOf(result, this.flags['detailed-exitcode']))
  }

  protected override unwindsOnInterrupt(): boolean {
    return true
  }

  protected override interruptNote(): string {
    return this.flags.watch
      ? 'the watch stopped after its current pass; rows it had not started were given back to the next pass'
      : 'the pass stopped claiming; the rows it had started were finished and those it had not were given back to the next pass'
  }
}

function exitCodeOf(result: PassResult, detailed: boolean): number {
  if (result.status === 'skipped') return ExitCode.passSkipped
  if (result.lanes.some((lane) => lane.error)) return ExitCode.laneError
  const remaining = result.remaining
  if (detailed && remaining && remaining.failed + remaining.uncertain > 0) return ExitCode.pending
  return ExitCode.ok
}

function renderPass(result: PassResult): string {
  if (result.skipped) return `pass skipped: ${result.skipped.code}: ${result.skipped.message}`
  const rows = result.lanes.map((lane) => [
    lane.lane,
    ...[lane.claimed, lane.completed, lane.retried, lane.failed, lane.uncertain, lane.skipped].map(String),
    `${lane.durationMs} ms`,
    lane.error ? `error: ${lane.error}` : (lane.skippedReason ?? lane.note ?? ''),
  ])
  const lines = [table(['LANE', 'CLAIMED', 'COMPLETED', 'RETRIED', 'FAILED', 'UNCERTAIN', 'SKIPPED', 'DURATION', 'NOTE'], rows, 'no lanes ran')]
  for (const fence of result.fences) lines.push(`backup fence ${fence.fenceId}: ${fence.outcome.replaceAll('_', ' ')}`)
  if (result.fenceError) lines.push(`backup fences not confirmed: ${result.fenceError}`)
  if (result.remaining) lines.push(`left in scope ${result.scope || '(none)'}: ${result.remaining.failed} failed, ${result.remaining.uncertain} uncertain`)
  if (result.waiting && result.waiting.deploys > 0) {
    const {deploys, nextDueInMs} = result.waiting
    const due = nextDueInMs === null ? '' : `, the next due in ${formatDuration(nextDueInMs)}`
    lines.push(
      `${deploys} deploy${deploys === 1 ? '' : 's'} not due yet (backoff, cooldown, or a waiting deploy)${due}: a later pass runs ${deploys === 1 ? 'it' : 'them'}`,
    )
  }
  return lines.join('\n')
}
