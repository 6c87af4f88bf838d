// The Workers panel of `status`: every live Worker of the kit (from the store), named by company and
// department, with its traffic over the host's recent window (host.worker_activity_window_seconds)
// where the host reports any — and the Worker whose error rate is over status.worker_error_* flagged.
// Scripts the host serves that this store does not own are listed too, by script. Never throws on the
// host's account: a host that does not answer leaves only the traffic figures out.
import type {Engine} from '../context.js'
import type {WorkerActivity} from '../../protocol/tail.js'
import type {VersionSplit} from '../../store/index.js'
import {formatWindow} from './format.js'

/** How many Workers the panel lists at most (the filter finds one among them; `total` counts them all). */
export const WORKERS_PANEL_LIMIT = 500

export interface WorkerActivityRow {
  script: string
  /** null for a script this store does not own. */
  department_id: string | null
  company_id: string | null
  worker_id: string | null
  /** The version it serves (its current version); null for a script this store does not own. */
  version_id: string | null
  /** Its deployment: the current version and, under a gradual deployment, the one beside it, with their shares; [] for a script this store does not own. */
  deployment: Array<{version_id: string; percentage: number}>
  /** null when the host reported no requests of it over the window (or did not answer). */
  requests: number | null
  errors: number | null
  p99Ms: number | null
  lastError: string | null
  /** Its error rate is at or over status.worker_error_rate_percent, with at least status.worker_error_min_requests requests. */
  errorRateHigh: boolean
}

export interface WorkersPanel {
  /** The host's activity window; null when it did not report activity. */
  windowSeconds: number | null
  /** Live Workers of the kit, listed or not. */
  total: number
  /** Those whose error rate is high first, then most errors, slowest p99, then by department. */
  workers: WorkerActivityRow[]
}

export interface ErrorRateThreshold {
  percent: number
  minRequests: number
}

export function errorRateThreshold(settings: Engine['settings']): ErrorRateThreshold {
  return {percent: settings.status.worker_error_rate_percent, minRequests: settings.status.worker_error_min_requests}
}

/** The one rule for a Worker's error rate needing attention. */
export function errorRateIsHigh(requests: number, errors: number, threshold: ErrorRateThreshold): boolean {
  return requests >= threshold.minRequests && errors * 100 >= threshold.percent * requests
}

/** `Worker acme-sales: 10 of 11 requests failed in 5m`: an attention line. */
export function errorRateReason(row: WorkerActivityRow, windowSeconds: number): string {
  return `Worker ${row.department_id ?? row.script}: ${row.errors} of ${row.requests} requests failed in ${formatWindow(windowSeconds)}`
}

export async function workersPanel(engine: Engine, scope: string | null, options: {timeoutMs?: number; threshold: ErrorRateThreshold}): Promise<WorkersPanel> {
  const [live, activity] = await Promise.all([engine.store.workers.live(scope, WORKERS_PANEL_LIMIT), hostActivity(engine, options.timeoutMs)])
  const traffic = new Map((activity?.workers ?? []).map((row) => [row.script, row]))
  const rowOf = (
    script: string,
    worker: {id: string; department_id: string; company_id: string; current_version_id: string | null; split?: VersionSplit | null} | null,
  ): WorkerActivityRow => {
    const seen = traffic.get(script)
    return {
      script,
      department_id: worker?.department_id ?? null,
      company_id: worker?.company_id ?? null,
      worker_id: worker?.id ?? null,
      version_id: worker?.current_version_id ?? null,
      deployment: deploymentOf(worker?.current_version_id ?? null, worker?.split ?? null),
      requests: seen?.requests ?? null,
      errors: seen?.errors ?? null,
      p99Ms: seen?.p99Ms ?? null,
      lastError: seen?.lastError ?? null,
      errorRateHigh: seen ? errorRateIsHigh(seen.requests, seen.errors, options.threshold) : false,
    }
  }
  const owned = live.workers.map((worker) => rowOf(worker.script_name, worker))
  const listed = new Set(live.workers.map((worker) => worker.script_name))
  // A script the host serves that is not among the listed live Workers: unowned, or past the limit.
  const others = await Promise.all(
    [...traffic.keys()]
      .filter((script) => !listed.has(script))
      .map(async (script) => {
        const worker = await engine.store.workers.getByScriptName(script)
        return worker && worker.retired_at !== null ? null : rowOf(script, worker ?? null)
      }),
  )
  const rows = [...owned, ...others.filter((row) => row !== null)]
  const byConcern = (a: WorkerActivityRow, b: WorkerActivityRow) =>
    Number(b.errorRateHigh) - Number(a.errorRateHigh) ||
    (b.errors ?? -1) - (a.errors ?? -1) ||
    (b.p99Ms ?? -1) - (a.p99Ms ?? -1) ||
    (a.department_id ?? a.script).localeCompare(b.department_id ?? b.script)
  const unowned = others.filter((row) => row !== null && row.worker_id === null).length
  return {
    windowSeconds: activity?.windowSeconds ?? null,
    total: live.total + unowned,
    workers: rows.sort(byConcern).slice(0, WORKERS_PANEL_LIMIT),
  }
}

function deploymentOf(versionId: string | null, split: VersionSplit | null): WorkerActivityRow['deployment'] {
  if (versionId === null) return []
  if (!split) return [{version_id: versionId, percentage: 100}]
  return [
    {version_id: versionId, percentage: split.percentage},
    {version_id: split.beside.version_id, percentage: split.beside.percentage},
  ]
}

async function hostActivity(engine: Engine, timeoutMs: number | undefined): Promise<WorkerActivity | null> {
  const resolution = await engine.resolveProvider()
  if (resolution.status !== 'ready') return null
  const signal = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)
  return resolution.provider.workerActivity(signal).catch(() => null)
}
