// The Workers panel of `status`: the Workers with the most errors, then the slowest p99, over the
// host's recent window (host.worker_activity_window_seconds), each named by its department where
// the store knows the script. Never throws: a host that does not answer leaves the panel empty.
import type {Engine} from '../context.js'

/** How many Workers the panel lists at most. */
export const WORKERS_PANEL_LIMIT = 20

export interface WorkerActivityRow {
  script: string
  /** null for a script this store does not own. */
  department_id: string | null
  worker_id: string | null
  requests: number
  errors: number
  p99Ms: number | null
  lastError: string | null
}

export interface WorkersPanel {
  windowSeconds: number
  workers: WorkerActivityRow[]
}

export async function workersPanel(engine: Engine, options: {timeoutMs?: number} = {}): Promise<WorkersPanel | null> {
  const resolution = await engine.resolveProvider()
  if (resolution.status !== 'ready') return null
  const signal = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs)
  const activity = await resolution.provider.workerActivity(signal).catch(() => null)
  if (!activity) return null
  const workers = await Promise.all(
    activity.workers.slice(0, WORKERS_PANEL_LIMIT).map(async (row): Promise<WorkerActivityRow> => {
      const worker = await engine.store.workers.getByScriptName(row.script)
      return {
        script: row.script,
        department_id: worker?.department_id ?? null,
        worker_id: worker?.id ?? null,
        requests: row.requests,
        errors: row.errors,
        p99Ms: row.p99Ms,
        lastError: row.lastError,
      }
    }),
  )
  return {windowSeconds: activity.windowSeconds, workers}
}
