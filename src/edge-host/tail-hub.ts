// Workers' events on the host. The shards' tail Worker (../workerd/config.ts) posts to the tail listener (a unix socket
// under the data dir that only workerd reaches) the counters of every trace, every TAIL_SUMMARY_INTERVAL_MS, and the full
// traces of the scripts someone reads, at once; the host's answer names those scripts. The hub turns each trace into a
// TailEvent (../protocol/tail.ts) and hands it to:
// - the live tails of its script (`GET /v1/scripts/:name/tail`, NDJSON; a tail that cannot keep up loses events rather
//   than holding the host's memory). Past host.tail_max_events_per_second the tail Worker counts a tailed script's
//   traces instead of posting them; the hub sums those counts and tells the script's tails once a second (`sampled`),
// - the Worker log file, when host.worker_log_file is set (./worker-log-file.ts).
// The per-Worker metrics (./metrics.ts): outcomes, status classes, exceptions and the last error from the tail Worker's
// counters, or from the counting main module's of a Worker nobody traces (./worker-counts.ts); wall time and WebSocket
// upgrades from the data plane (`served`). Labels exist only for scripts the host serves, so the label set is bounded by
// the scripts deployed. The activity window `status` reads (./worker-activity.ts) takes the data plane's requests and the
// last error.
// Every text a Worker produced (console lines, exception messages and stacks, the path) has the values of that Worker's
// secrets replaced before it goes anywhere, and its frames mapped to the original source by its source map (./source-maps.ts).
import http from 'node:http'
import {PassThrough, type Readable} from 'node:stream'
import type {Logger} from 'pino'
import {SCRIPT_NAME_PATTERN} from '../protocol/management-api.js'
import {tailLogLevels, tailOutcomes, type TailEvent, type TailOutcome, type TailSampled, type WorkerActivity} from '../protocol/tail.js'
import {secretRedactor} from '../util/redact.js'
import {readBoundedBody, type BodyBudget} from './http/body-limits.js'
import type {HostMetrics} from './metrics.js'
import type {SourceMaps, StackMapper} from './source-maps.js'
import {ActivityWindow} from './worker-activity.js'
import type {WorkerLogFile} from './worker-log-file.js'
import {scriptOfService, splitServiceName} from '../workerd/script.js'
import type {RouteRecord} from './state/scripts.js'

export interface TailHubOptions {
  metrics: HostMetrics
  /** The script as the data plane routes it: served while not retired; the kit's version ids of its release(s). */
  route(script: string): Pick<RouteRecord, 'retired' | 'versionIds' | 'split'> | null
  /** The values of the script's secrets, to keep them out of every event. */
  secretValues(script: string): string[]
  sourceMaps: SourceMaps
  logFile: WorkerLogFile | null
  /** The window of the activity summary. */
  activityWindowSeconds: number
  /** host.tail_max_events_per_second: a live tail's share of one script's events, per second. */
  maxEventsPerSecond: number
  /** A tail was attached or ended (the front door sends tailed Workers through the host). */
  onTailsChanged?(): void
  log: Logger
}

/** What the tail Worker posts: counters per script, and the full traces of the scripts the host forwards. */
interface Posted {
  summaries?: Record<string, PostedSummary>
  events?: PostedTrace[]
}

/** A script's traces since the last post, counted. */
interface PostedSummary {
  outcomes?: Record<string, number>
  /** By status code; "none" when the Worker answered nothing. */
  statuses?: Record<string, number>
  exceptions?: number
  lastError?: string | null
  /** Traces of a tailed script over the per-second budget: counted, not posted. */
  sampled?: number
}

/** The host's answer: the scripts whose full traces it wants, or "*" for all (the Worker log file), and how many of a script's traces per second a live tail gets (ignored under "*"). */
export interface TailSinkAnswer {
  forward: string[] | '*'
  maxEventsPerSecond: number
}

/** What the tail Worker posts per forwarded trace. */
interface PostedTrace {
  script: string
  endedAt: number
  trace: {
    outcome?: string
    eventTimestamp?: number | null
    truncated?: boolean
    /** `cron`: a scheduled() invocation's trigger; `queue`, `batchSize`: a queue() invocation's batch (neither has a request). */
    event?: {request?: {url?: string; method?: string}; response?: {status?: number}; cron?: string; queue?: string; batchSize?: number} | null
    logs?: Array<{level?: string; timestamp?: number; message?: unknown}>
    exceptions?: Array<{name?: string; message?: string; stack?: string; timestamp?: number}>
  }
}

/** A live tail buffers at most this much unsent output; past it its events are dropped. */
const SUBSCRIBER_BUFFER_BYTES = 1024 * 1024
/** An idle tail stream gets a blank line this often, so the caller (and proxies) see it alive. */
export const TAIL_HEARTBEAT_MS = 5_000
/** A post of the tail Worker (a batch of traces) may not exceed this. */
const MAX_POST_BYTES = 16 * 1024 * 1024
/** Sampled-out counts are summed this long before the tails are told. */
const SAMPLED_NOTICE_INTERVAL_MS = 1_000

export class TailHub {
  private readonly subscribers = new Map<string, Set<PassThrough>>()
  private readonly window: ActivityWindow
  /** Traces sampled out per tailed script since the last notice. */
  private readonly sampledOut = new Map<string, number>()
  private sampledNoticeTimer: NodeJS.Timeout | null = null
  /** Asset events a script's tails got in the current second (the tail Worker budgets the others). */
  private readonly assetEventsThisSecond = new Map<string, {second: number; count: number}>()

  constructor(private readonly options: TailHubOptions) {
    this.window = new ActivityWindow(options.activityWindowSeconds)
  }

  /** Takes one post of the tail Worker; answers which scripts' full traces to send from now on. */
  publish(posted: unknown): TailSinkAnswer {
    const {summaries, events: traces} = (posted ?? {}) as Posted
    const redactors = new Map<string, (text: string) => string>()
    const redactorOf = (script: string) => {
      let redact = redactors.get(script)
      if (!redact) redactors.set(script, (redact = secretRedactor(this.options.secretValues(script))))
      return redact
    }
    // A split release's traces come under its workerd name (./state/script-splits.ts): the script's, with its own version.
    for (const [service, summary] of Object.entries(summaries ?? {})) {
      const {script, split} = scriptOfService(service)
      if (!this.isServed(script)) continue
      this.tally(script, summary, redactorOf(script), this.versionOf(script, split))
      if (isCount(summary.sampled) && summary.sampled > 0) this.countSampled(script, summary.sampled)
    }
    const mappers = new Map<string, StackMapper | null>()
    const logLines: string[] = []
    for (const item of Array.isArray(traces) ? traces : []) {
      const service = String(item?.script)
      const {script, split} = scriptOfService(service)
      if (!this.isServed(script)) continue
      const subscribers = this.subscribers.get(script)
      if (!subscribers && !this.options.logFile) continue
      // Each release's frames map through its own source maps.
      if (!mappers.has(service)) mappers.set(service, this.options.sourceMaps.mapperOf(service))
      // Serialized once for every reader.
      const line = JSON.stringify(eventOf({...item, script}, this.versionOf(script, split), redactorOf(script), mappers.get(service) ?? null))
      for (const subscriber of subscribers ?? []) {
        if (subscriber.writableLength < SUBSCRIBER_BUFFER_BYTES) subscriber.write(`${line}\n`)
      }
      logLines.push(line)
    }
    if (logLines.length > 0) this.options.logFile?.append(logLines)
    const forward = [...this.subscribers.keys()].flatMap((script) => [script, splitServiceName(script)])
    return {forward: this.options.logFile ? '*' : forward, maxEventsPerSecond: this.options.maxEventsPerSecond}
  }

  /** Events of a tailed script its tails did not get (the tail Worker's budget, or the data plane's: ./runtime/traced-requests.ts). */
  countSampled(script: string, count: number): void {
    if (!this.subscribers.has(script)) return
    this.sampledOut.set(script, (this.sampledOut.get(script) ?? 0) + count)
    this.sampledNoticeTimer ??= setTimeout(() => this.sendSampledNotices(), SAMPLED_NOTICE_INTERVAL_MS)
  }

  /** Each tail of a script that had events sampled out hears how many (notices are small: no buffer check). */
  private sendSampledNotices(): void {
    this.sampledNoticeTimer = null
    const time = new Date().toISOString()
    for (const [script, skipped] of this.sampledOut) {
      const notice: TailSampled = {type: 'sampled', time, script, skipped, maxEventsPerSecond: this.options.maxEventsPerSecond}
      for (const subscriber of this.subscribers.get(script) ?? []) subscriber.write(`${JSON.stringify(notice)}\n`)
    }
    this.sampledOut.clear()
  }

  /**
   * One request the data plane forwarded to the script and saw to its end: its wall time and status
   * (101: a WebSocket accepted; null: no answer).
   */
  served(script: string, durationMs: number, status: number | null): void {
    const {metrics} = this.options
    metrics.workerWallSeconds.observe({script}, durationMs / 1000)
    if (status === 101) metrics.workerWebSockets.inc({script})
    this.window.served(script, durationMs, status)
  }

  /** `count` requests the front door's fast path answered with status class `statusClass` (`2xx`, …, `other`). */
  frontServed(script: string, statusClass: string, count: number): void {
    this.window.counted(script, count, statusClass === '5xx' || statusClass === 'other' ? count : 0)
  }

  /**
   * A request the data plane answered from the script's static assets, the Worker not run: an event
   * marked `asset` for its tails (within the same per-second budget) and the Worker log file.
   */
  assetServed(script: string, request: {method: string; path: string; status: number; startedAt: number}): void {
    const subscribers = this.subscribers.get(script)
    if (!subscribers && !this.options.logFile) return
    const now = Date.now()
    const event: TailEvent = {
      time: new Date(request.startedAt).toISOString(),
      script,
      method: request.method,
      path: request.path,
      status: request.status,
      outcome: 'ok',
      durationMs: Math.max(0, now - request.startedAt),
      logs: [],
      exceptions: [],
      truncated: false,
      asset: true,
    }
    const line = JSON.stringify(event)
    this.options.logFile?.append([line])
    if (!subscribers) return
    const second = Math.floor(now / 1000)
    const budget = this.assetEventsThisSecond.get(script)
    const sent = budget?.second === second ? budget : {second, count: 0}
    this.assetEventsThisSecond.set(script, sent)
    if (sent.count >= this.options.maxEventsPerSecond) {
      this.countSampled(script, 1)
      return
    }
    sent.count++
    for (const subscriber of subscribers) {
      if (subscriber.writableLength < SUBSCRIBER_BUFFER_BYTES) subscriber.write(`${line}\n`)
    }
  }

  /** The kit's id of the version serving as the script's current release or its split release; null: unknown. */
  private versionOf(script: string, split: boolean): string | null {
    const route = this.options.route(script)
    return (split ? route?.split?.versionIds[0] : route?.versionIds[0]) ?? null
  }

  private isServed(script: unknown): script is string {
    if (typeof script !== 'string' || !SCRIPT_NAME_PATTERN.test(script)) return false
    const route = this.options.route(script)
    return route !== null && !route.retired
  }

  isTailed = (script: string): boolean => this.subscribers.has(script)

  /** Whether workerd should trace `script`: a live tail or the Worker log file reads its traces. */
  wantsTraces(script: string): boolean {
    return this.options.logFile !== null || this.subscribers.has(script)
  }

  /** A live NDJSON stream of the script's events, until `dispose` or close(); it opens (the caller waits for its first bytes) once `traced()` did. */
  subscribe(script: string, traced: () => Promise<void>): {stream: Readable; dispose(): Promise<void>} {
    const stream = new PassThrough()
    const heartbeat = setInterval(() => stream.write('\n'), TAIL_HEARTBEAT_MS)
    let set = this.subscribers.get(script)
    if (!set) this.subscribers.set(script, (set = new Set()))
    set.add(stream)
    this.options.onTailsChanged?.()
    void traced()
      .catch((error: unknown) => this.options.log.warn({err: error, script}, 'the tailed script is not traced yet'))
      .finally(() => stream.write('\n'))
    return {
      stream,
      dispose: async () => {
        clearInterval(heartbeat)
        set.delete(stream)
        if (set.size === 0 && this.subscribers.get(script) === set) this.subscribers.delete(script)
        this.options.onTailsChanged?.()
        stream.end()
      },
    }
  }

  /** Ends every live tail (the host is stopping; callers reconnect to the next host process). */
  close(): void {
    if (this.sampledNoticeTimer) clearTimeout(this.sampledNoticeTimer)
    this.sampledNoticeTimer = null
    for (const set of this.subscribers.values()) for (const stream of set) stream.end()
  }

  /** Workers with requests in the window, most errors first, then slowest p99. */
  activity(now = Date.now()): WorkerActivity {
    return this.window.activity(now)
  }

  /** A retired script: its metric labels and its activity go. */
  forget(script: string): void {
    const {metrics} = this.options
    metrics.workerWallSeconds.remove({script})
    metrics.workerExceptions.remove({script})
    metrics.workerWebSockets.remove({script})
    metrics.workerSubrequests.remove({script, kind: 'service_binding'})
    for (const outcome of tailOutcomes) metrics.workerOutcomes.remove({script, outcome})
    for (const statusClass of STATUS_CLASSES) metrics.workerResponses.remove({script, status_class: statusClass})
    void metrics.assetResponses.removeScript(script)
    void metrics.workerVersionResponses.removeScript(script)
    this.window.forget(script)
    this.assetEventsThisSecond.delete(script)
  }

  private tally(script: string, summary: PostedSummary, redact: (text: string) => string, version: string | null): void {
    const {metrics} = this.options
    for (const [outcome, count] of Object.entries(summary.outcomes ?? {})) {
      const known = (tailOutcomes as readonly string[]).includes(outcome) ? (outcome as TailOutcome) : 'unknown'
      if (isCount(count)) metrics.workerOutcomes.inc({script, outcome: known}, count)
    }
    for (const [status, count] of Object.entries(summary.statuses ?? {})) {
      if (!isCount(count)) continue
      const statusClass = statusClassOf(status === 'none' ? null : Number(status))
      metrics.workerResponses.inc({script, status_class: statusClass}, count)
      if (version !== null) metrics.workerVersionResponses.inc({script, version, status_class: statusClass}, count)
    }
    if (isCount(summary.exceptions) && summary.exceptions > 0) metrics.workerExceptions.inc({script}, summary.exceptions)
    if (typeof summary.lastError === 'string') this.window.failed(script, redact(summary.lastError))
  }
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0
}

function eventOf({script, endedAt, trace}: PostedTrace, versionId: string | null, redact: (text: string) => string, mapStack: StackMapper | null): TailEvent {
  const mapped = mapStack ?? ((text: string) => text)
  const startedAt = typeof trace.eventTimestamp === 'number' ? trace.eventTimestamp : endedAt
  const request = trace.event?.request
  const status = trace.event?.response?.status
  const cron = trace.event?.cron
  const queue = trace.event?.queue
  const invoked = typeof cron === 'string' ? {method: 'SCHEDULED', path: cron} : typeof queue === 'string' ? {method: 'QUEUE', path: queue} : null
  return {
    time: new Date(startedAt).toISOString(),
    script,
    versionId,
    // A cron run shows as SCHEDULED <cron expression>, a queue batch as QUEUE <queue name>.
    method: typeof request?.method === 'string' ? request.method : (invoked?.method ?? ''),
    path: invoked !== null && request?.url === undefined ? invoked.path : redact(pathOf(request?.url)),
    status: typeof status === 'number' ? status : null,
    outcome: (tailOutcomes as readonly string[]).includes(trace.outcome ?? '') ? (trace.outcome as TailOutcome) : 'unknown',
    durationMs: Math.max(0, endedAt - startedAt),
    logs: (trace.logs ?? []).map((line) => ({
      time: isoOf(line.timestamp, startedAt),
      level: (tailLogLevels as readonly string[]).includes(line.level ?? '') ? (line.level as TailEvent['logs'][number]['level']) : 'log',
      message: redact(mapped(consoleLineOf(line.message))),
    })),
    exceptions: (trace.exceptions ?? []).map((exception) => ({
      time: isoOf(exception.timestamp, startedAt),
      name: String(exception.name ?? 'Error'),
      message: redact(String(exception.message ?? '')),
      stack: redact(mapped(String(exception.stack ?? ''))),
    })),
    truncated: trace.truncated === true,
  }
}

/** The tail listener: the tail Worker posts its batches here. */
export function createTailSinkServer(hub: TailHub, bodyBudget: BodyBudget, log: Logger): http.Server {
  return http.createServer((request, response) => {
    readBoundedBody(request, response, MAX_POST_BYTES, bodyBudget)
      .then((body) => {
        const answer = JSON.stringify(hub.publish(JSON.parse(body.toString('utf8'))))
        response.writeHead(200, {'content-type': 'application/json'}).end(answer)
      })
      .catch((error: unknown) => {
        log.warn({err: error}, 'tail post refused')
        if (!response.headersSent) response.writeHead(400).end()
      })
  })
}

const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx', 'none'] as const

function statusClassOf(status: number | null): (typeof STATUS_CLASSES)[number] {
  if (status === null || status < 100 || status > 599) return 'none'
  return `${Math.floor(status / 100)}xx` as (typeof STATUS_CLASSES)[number]
}

/** A console line as the console prints it: strings as they are, other values as JSON. */
function consoleLineOf(message: unknown): string {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((part) => (typeof part === 'string' ? part : (JSON.stringify(part) ?? String(part)))).join(' ')
}

function pathOf(url: unknown): string {
  if (typeof url !== 'string') return ''
  try {
    const parsed = new URL(url)
    return `${parsed.pathname}${parsed.search}`
  } catch {
    return ''
  }
}

function isoOf(timestamp: unknown, fallback: number): string {
  return new Date(typeof timestamp === 'number' && Number.isFinite(timestamp) ? timestamp : fallback).toISOString()
}
