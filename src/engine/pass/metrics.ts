// The pass summary as a node_exporter textfile (Prometheus text format 0.0.4, rendered by prom-client).
// Replaced atomically, so the collector never reads half a file.
// A lane's last-success time survives passes that fail or skip it: it is carried over from the file
// the previous pass wrote (each pass is its own process under cron).
import {constants as fsConstants} from 'node:fs'
import {access, readFile, stat} from 'node:fs/promises'
import path from 'node:path'
import {KitError, messageOf} from '../../errors.js'
import {writeFileAtomically} from '../../util/atomic-file.js'
import {BUILD_INFO_METRIC, buildInfo} from '../../util/build-info.js'
import {LANE_NAMES, type LaneName} from './lane.js'
import type {PassResult} from './run-pass.js'

const PREFIX = 'edgeworkers_reconcile'
const LAST_SUCCESS = `${PREFIX}_lane_last_success_timestamp_seconds`
const ROW_OUTCOMES = ['claimed', 'completed', 'retried', 'failed', 'uncertain', 'skipped'] as const

/** Refuses (usage error) a metrics path that cannot be written, before any pass runs. */
export async function assertMetricsFileWritable(file: string): Promise<void> {
  const fail = (reason: string): never => {
    throw new KitError('usage', `metrics file ${file} is not writable: ${reason}`)
  }
  const directory = path.dirname(file)
  const problem = (error: NodeJS.ErrnoException) => fail(`directory ${directory}: ${error.code ?? messageOf(error)}`)
  if (!(await stat(directory).catch(problem)).isDirectory()) fail(`${directory} is not a directory`)
  await access(directory, fsConstants.W_OK).catch(problem)
  if ((await stat(file).catch(() => undefined))?.isDirectory()) fail('it is a directory')
}

export async function writeMetricsFile(file: string, result: PassResult): Promise<void> {
  const previous = await readFile(file, 'utf8').catch(() => '')
  try {
    // World-readable, the one exception to the kit's private files: node_exporter, which reads it,
    // runs as its own user, and the file holds counts and times only.
    await writeFileAtomically(file, await renderMetrics(result, lastSuccessTimes(previous)), {mode: 0o644})
  } catch (error) {
    throw new KitError('usage', `metrics file ${file} is not writable: ${(error as NodeJS.ErrnoException).code ?? messageOf(error)}`)
  }
}

export async function renderMetrics(result: PassResult, previousLastSuccess: ReadonlyMap<LaneName, number>): Promise<string> {
  // Loaded here, not with the lanes: only a pass with --metrics-file renders (every cron start would pay it).
  // prom-client is CommonJS: its module.exports is the default export, whether Node or the bundle loads it.
  const {Gauge, Registry} = (await import('prom-client')).default
  const registry = new Registry()
  // A metric with no samples is left out entirely (a skipped pass has no lane rows to report).
  const metric = (name: string, help: string, samples: Array<[labels: Record<string, string>, value: number]>) => {
    if (samples.length === 0) return
    const gauge = new Gauge({name, help, labelNames: Object.keys(samples[0]![0]), registers: [registry]})
    for (const [labels, value] of samples) gauge.set(labels, value)
  }
  const startedAt = Date.parse(result.startedAt) / 1000
  const passEnd = startedAt + result.durationMs / 1000

  metric(BUILD_INFO_METRIC.name, BUILD_INFO_METRIC.help, [[{...buildInfo()}, 1]])
  metric(`${PREFIX}_pass_timestamp_seconds`, 'When the last pass started (Unix time).', [[{}, startedAt]])
  metric(`${PREFIX}_pass_duration_seconds`, 'How long the last pass ran.', [[{}, result.durationMs / 1000]])
  metric(`${PREFIX}_pass_skipped`, '1 when the last pass was skipped because the provider is invalid.', [[{}, result.status === 'skipped' ? 1 : 0]])
  metric(
    `${PREFIX}_lane_rows`,
    'Rows a lane handled in the last pass, by outcome (claimed = the sum of the others).',
    result.lanes.flatMap((lane) => ROW_OUTCOMES.map((outcome): [Record<string, string>, number] => [{lane: lane.lane, outcome}, lane[outcome]])),
  )
  metric(
    `${PREFIX}_lane_duration_seconds`,
    'How long a lane ran in the last pass.',
    result.lanes.map((lane) => [{lane: lane.lane}, lane.durationMs / 1000]),
  )
  metric(
    `${PREFIX}_lane_error`,
    '1 when a lane ended with an error in the last pass.',
    result.lanes.map((lane) => [{lane: lane.lane}, lane.error ? 1 : 0]),
  )

  const lastSuccess = new Map(previousLastSuccess)
  for (const lane of result.lanes) if (!lane.error) lastSuccess.set(lane.lane, passEnd)
  metric(
    LAST_SUCCESS,
    'When a lane last finished a pass without an error (Unix time).',
    LANE_NAMES.filter((lane) => lastSuccess.has(lane)).map((lane) => [{lane}, lastSuccess.get(lane)!]),
  )
  if (result.remaining) {
    metric(`${PREFIX}_rows_unsettled`, 'Rows of the swept lanes left failed or uncertain in scope, waiting for an operator.', [
      [{status: 'failed'}, result.remaining.failed],
      [{status: 'uncertain'}, result.remaining.uncertain],
    ])
  }
  return registry.metrics()
}

/** The last-success samples of a previously written file (anything else in it is ignored). */
export function lastSuccessTimes(text: string): Map<LaneName, number> {
  const times = new Map<LaneName, number>()
  const pattern = new RegExp(`^${LAST_SUCCESS}\\{lane="([a-z_]+)"\\} (\\S+)$`, 'gm')
  for (const [, lane, value] of text.matchAll(pattern)) {
    if ((LANE_NAMES as readonly string[]).includes(lane!) && Number.isFinite(Number(value))) times.set(lane as LaneName, Number(value))
  }
  return times
}
