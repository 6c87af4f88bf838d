// The activity window `status` reads (GET /v1/workers/activity): per Worker, the requests the data plane answered
// over host.worker_activity_window_seconds, how many failed, the p99 of their wall time, and the last error the
// Worker's counters reported (./tail-hub.ts). The Node data plane times each request it forwards; the HAProxy front
// door's fast path (./front/front.ts) is known only by its statistics, by status class, when the host reads them:
// those requests count, and fail, but carry no wall time (the p99 is of the timed ones; null when there are none).
import {isErrorStatus, type WorkerActivity} from '../protocol/tail.js'

/** Samples kept per Worker. */
const MAX_SAMPLES = 2_000

/** Requests seen at `at`: one the Node data plane timed, or a batch the fast path answered (untimed). */
type Sample = {at: number; durationMs: number | null; requests: number; errors: number}

export class ActivityWindow {
  private readonly samples = new Map<string, Sample[]>()
  private readonly lastErrors = new Map<string, string>()

  constructor(private readonly windowSeconds: number) {}

  /** One request the Node data plane forwarded and saw to its end (status null: no answer). */
  served(script: string, durationMs: number, status: number | null): void {
    this.add(script, {at: Date.now(), durationMs, requests: 1, errors: isErrorStatus(status) ? 1 : 0})
  }

  /** `requests` the fast path answered since the last read of its statistics, `errors` of them failed. */
  counted(script: string, requests: number, errors: number): void {
    this.add(script, {at: Date.now(), durationMs: null, requests, errors})
  }

  /** The last error the Worker's counters reported (its secrets already redacted). */
  failed(script: string, lastError: string): void {
    this.lastErrors.set(script, lastError)
  }

  /** Workers with requests in the window, most errors first, then slowest p99. */
  activity(now = Date.now()): WorkerActivity {
    const since = now - this.windowSeconds * 1000
    const workers: WorkerActivity['workers'] = []
    for (const [script, samples] of this.samples) {
      const recent = samples.slice(-MAX_SAMPLES).filter((sample) => sample.at >= since)
      if (recent.length === 0) {
        this.samples.delete(script)
        continue
      }
      this.samples.set(script, recent)
      const durations = recent.flatMap((sample) => (sample.durationMs === null ? [] : [sample.durationMs])).sort((a, b) => a - b)
      workers.push({
        script,
        requests: recent.reduce((sum, sample) => sum + sample.requests, 0),
        errors: recent.reduce((sum, sample) => sum + sample.errors, 0),
        p99Ms: durations.length === 0 ? null : durations[Math.min(durations.length - 1, Math.ceil(durations.length * 0.99) - 1)]!,
        lastError: this.lastErrors.get(script) ?? null,
      })
    }
    workers.sort((a, b) => b.errors - a.errors || (b.p99Ms ?? 0) - (a.p99Ms ?? 0) || a.script.localeCompare(b.script))
    return {windowSeconds: this.windowSeconds, workers}
  }

  /** A retired script: its activity goes. */
  forget(script: string): void {
    this.samples.delete(script)
    this.lastErrors.delete(script)
  }

  private add(script: string, sample: Sample): void {
    let samples = this.samples.get(script)
    if (!samples) this.samples.set(script, (samples = []))
    samples.push(sample)
    // Cut back only at twice the bound: one splice per MAX_SAMPLES requests, not a move of the whole list per request.
    if (samples.length >= 2 * MAX_SAMPLES) samples.splice(0, samples.length - MAX_SAMPLES)
  }
}
