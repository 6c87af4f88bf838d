// Worker events, as the host's tail stream (`GET /v1/scripts/:name/tail`, NDJSON) and its Worker log
// file carry them, and the activity summary `status` reads (`GET /v1/workers/activity`). One event
// per finished invocation of a Worker (a request, or a WebSocket upgrade), built from workerd's trace,
// and one per request the host answered from the Worker's static assets alone (`asset: true`).
// Under volume the tail stream also carries `sampled` notices: how many events the host left out.
import {z} from 'zod'

/** How an invocation ended, as workerd's trace says (`exceededCpu`/`exceededMemory`: a limit hit). */
export const tailOutcomes = ['ok', 'exception', 'exceededCpu', 'exceededMemory', 'canceled', 'unknown'] as const
export type TailOutcome = (typeof tailOutcomes)[number]

export const tailLogLevels = ['debug', 'log', 'info', 'warn', 'error'] as const

export const tailEventSchema = z.strictObject({
  /** The invocation's start, ISO 8601. */
  time: z.string(),
  script: z.string(),
  /** The kit's id of the version that ran (two serve at once under a gradual deployment); null: the host does not know it. */
  versionId: z.string().nullable().optional(),
  method: z.string(),
  /** Path and query as the Worker saw them. */
  path: z.string(),
  /** null when the Worker answered nothing (an exception, a limit, a cancel). */
  status: z.number().int().nullable(),
  outcome: z.enum(tailOutcomes),
  /** Wall time from the start to the end of the invocation, ms. */
  durationMs: z.number().min(0),
  logs: z.array(z.strictObject({time: z.string(), level: z.enum(tailLogLevels), message: z.string()})),
  exceptions: z.array(z.strictObject({time: z.string(), name: z.string(), message: z.string(), stack: z.string()})),
  /** workerd cut the logs of this invocation short (too many or too large). */
  truncated: z.boolean(),
  /** Present and true on a request the host answered from the Worker's static assets, the Worker not run. */
  asset: z.literal(true).optional(),
})
export type TailEvent = z.infer<typeof tailEventSchema>

/**
 * A live tail gets at most host.tail_max_events_per_second events of a script per second; the
 * others are counted, and the count reaches the script's tails as this notice about once a second.
 * Never in the Worker log file, which gets every event.
 */
export const tailSampledSchema = z.strictObject({
  type: z.literal('sampled'),
  /** When the host sent the notice, ISO 8601. */
  time: z.string(),
  script: z.string(),
  /** Events of the script left out since the previous notice. */
  skipped: z.number().int().min(1),
  /** host.tail_max_events_per_second: what a tail gets per second at most. */
  maxEventsPerSecond: z.number().int(),
})
export type TailSampled = z.infer<typeof tailSampledSchema>

/** One line of the tail stream: an event, or a notice (the lines with a `type`). */
export const tailLineSchema = z.union([tailEventSchema, tailSampledSchema])
export type TailLine = z.infer<typeof tailLineSchema>

export function isTailEvent(line: TailLine): line is TailEvent {
  return !('type' in line)
}

/** An event that failed: an exception or limit, or a 5xx answer. The one rule for "error" everywhere. */
export function isErrorEvent(event: Pick<TailEvent, 'outcome' | 'status'>): boolean {
  return event.outcome !== 'ok' || (event.status !== null && isErrorStatus(event.status))
}

/** A request that failed, as the data plane sees it: a 5xx answer (an exception's is 500) or none. */
export function isErrorStatus(status: number | null): boolean {
  return status === null || status >= 500
}

export const workerActivitySchema = z.strictObject({
  windowSeconds: z.number().int(),
  workers: z.array(
    z.strictObject({
      script: z.string(),
      requests: z.number().int(),
      errors: z.number().int(),
      /** p99 of the wall time over the window, ms; null without requests. */
      p99Ms: z.number().nullable(),
      lastError: z.string().nullable(),
    }),
  ),
})
export type WorkerActivity = z.infer<typeof workerActivitySchema>
