// Prometheus metrics of one host, on its own registry (several hosts may share a process in tests).
// Per-Worker series carry the script's department (upload metadata) next to `script` when the host
// knows it, so one series per script either way: the label set stays bounded by the scripts served.
import {Counter, Gauge, Histogram, type LabelValues, Registry, collectDefaultMetrics} from 'prom-client'
import type {ScriptState} from '../protocol/management-api.js'
import {BUILD_INFO_METRIC, buildInfo} from '../util/build-info.js'

/** Label for requests that matched no served script: unknown names must not grow the label set. */
export const UNKNOWN_SCRIPT_LABEL = 'unknown'

/** Read at scrape time, so the gauges are never stale. */
export interface MetricSources {
  fenceActive(): boolean
  scriptCounts(): Record<ScriptState, number>
  quarantinedCount(): number
  openConnections(): number
  /** The department the script's current release was uploaded for, null when the upload named none. */
  departmentOf(script: string): string | null
  /** Counts the binding operations the shards have counted since the last read (./binding-operations.ts). */
  readBindingOperations(): Promise<void>
  /** Brings edgeworkers_host_requests_total up to date with the requests the front door answered (../front/front.ts). */
  readFrontRequests(): Promise<void>
  /** Counts what the counted Workers (those nobody traces) have counted since the last read (./worker-counts.ts). */
  readWorkerCounts(): Promise<void>
}

/**
 * prom-client's default gauges whose names end in `_total`, the suffix Prometheus reserves for
 * counters. Each is the sum of the gauge of the same name without it, which stays (per type).
 */
const TOTAL_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']

export class HostMetrics {
  readonly registry = new Registry()

  readonly requests = this.workerCounter(
    'edgeworkers_host_requests_total',
    'Data-plane requests by script and response status (under host.front = "haproxy", those its fast path answered by status class: 2xx, …).',
    ['script', 'status'],
    () => this.sources.readFrontRequests(),
  )

  readonly connectionsShed = this.counter(
    'edgeworkers_host_connections_shed_total',
    'Client connections refused (address_cap, budget) or closed while idle to make room (evicted), by listener.',
    ['listener', 'reason'],
  )

  readonly shardRestarts = this.counter(
    'edgeworkers_host_shard_restarts_total',
    'workerd shard (re)starts by shard and reason (start, deploy, crash, runaway, recycle, settle, traces).',
    ['shard', 'reason'],
  )

  readonly swapSeconds = new Histogram({
    name: 'edgeworkers_host_shard_swap_seconds',
    help: 'Shard swap time: from a (re)start until the new workerd serves. mode="hold": requests waited that long; "overlap": nobody waited; "load": no swap, deployed Workers loaded into the running workerd.',
    labelNames: ['reason', 'mode'] as const,
    buckets: [0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30],
    registers: [this.registry],
  })

  readonly controlCalls = this.counter(
    'edgeworkers_host_control_calls_total',
    'Control calls by operation: applied, or answered from the receipt of an earlier call with the same mutation id (replayed).',
    ['operation', 'outcome'],
  )

  readonly shardUp = new Gauge({
    name: 'edgeworkers_host_shard_up',
    help: '1 while the shard serves, 0 while it starts, swaps or is down.',
    labelNames: ['shard'] as const,
    registers: [this.registry],
  })

  readonly spareReady = new Gauge({
    name: 'edgeworkers_host_spare_process_ready',
    help: '1 while a spare workerd stands ready for the next runaway or crashed shard (host.spare_process), else 0.',
    registers: [this.registry],
  })

  readonly incidents = this.workerCounter(
    'edgeworkers_host_worker_incidents_total',
    'Runaway incidents (stall, memory, crash) by suspected script ("unknown" when no request was inside).',
    ['script', 'kind'],
  )

  readonly quarantines = this.workerCounter('edgeworkers_host_worker_quarantines_total', 'Releases quarantined after too many incidents.', ['script'])

  // Per-Worker figures, labelled only for scripts the host serves and removed when a script is
  // retired (./tail-hub.ts forget), so the label set is bounded by the scripts deployed. Where each
  // comes from: invocations, responses and exceptions from workerd's traces (the tail Worker's
  // counters); wall time and WebSockets from the data plane; subrequests from the host's
  // service-binding listener. workerd reports no CPU time (its traces carry cpuTime = wallTime = 0)
  // and a Worker's fetch() to the internet leaves through workerd's own network service, so there
  // is no per-Worker CPU figure and no count of internet subrequests; the watchdog bounds CPU per shard.
  readonly workerOutcomes = this.workerCounter(
    'edgeworkers_host_worker_invocations_total',
    'Worker invocations by script and outcome (ok, exception, exceededCpu, exceededMemory, canceled, unknown).',
    ['script', 'outcome'],
    () => this.sources.readWorkerCounts(),
  )

  readonly workerResponses = this.workerCounter(
    'edgeworkers_host_worker_responses_total',
    'Worker responses by script and status class (1xx … 5xx; "none" when the Worker answered nothing).',
    ['script', 'status_class'],
    () => this.sources.readWorkerCounts(),
  )

  readonly workerVersionResponses = this.workerCounter(
    'edgeworkers_host_worker_version_responses_total',
    "Worker responses by script, version (the kit's version id; two under a gradual deployment) and status class.",
    ['script', 'version', 'status_class'],
    () => this.sources.readWorkerCounts(),
  )

  readonly workerExceptions = this.workerCounter(
    'edgeworkers_host_worker_exceptions_total',
    'Uncaught exceptions thrown by Workers, by script.',
    ['script'],
    () => this.sources.readWorkerCounts(),
  )

  readonly workerWallSeconds = new WorkerHistogram(
    new Histogram({
      name: 'edgeworkers_host_worker_wall_seconds',
      help: 'Wall time of requests the data plane forwarded to a Worker (to the last byte of the answer, or the 101), by script.',
      labelNames: ['script', 'department'] as const,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [this.registry],
    }),
    (labels) => this.withDepartment(labels),
  )

  readonly workerSubrequests = this.workerCounter(
    'edgeworkers_host_worker_subrequests_total',
    'Subrequests a Worker made that the host carries, by script and kind (service_binding); fetch() to the internet is not counted.',
    ['script', 'kind'],
  )

  readonly workerWebSockets = this.workerCounter(
    'edgeworkers_host_worker_websockets_total',
    'WebSocket connections a Worker accepted (the data plane relayed its 101), by script.',
    ['script'],
  )

  // Counted by each binding service Worker and read from the shards at each scrape (and before a
  // process is stopped): see ../workerd/binding-metrics.ts.
  readonly bindingOperations = this.workerCounter(
    'edgeworkers_host_worker_binding_operations_total',
    'Calls a Worker made on its KV, D1, R2 and queue bindings, by script, binding type (kv, d1, r2, queue), binding name, operation (get, put, query, execute, batch, send, …) and outcome (ok; error: refused or failed — a missing key or object is ok).',
    ['script', 'type', 'binding', 'operation', 'outcome'],
    () => this.sources.readBindingOperations(),
  )

  readonly assetResponses = this.workerCounter(
    'edgeworkers_host_asset_responses_total',
    'Requests answered from a Worker\'s static assets without running it (or through its assets binding, via="binding"), by script and status.',
    ['script', 'status', 'via'],
  )

  constructor(private readonly sources: MetricSources) {
    const build = buildInfo()
    new Gauge({...BUILD_INFO_METRIC, registers: [this.registry]}).set(build, 1)
    new Gauge({
      name: 'edgeworkers_host_workers_quarantined',
      help: 'Scripts whose current release is quarantined (refused with 503 worker_quarantined until the next deploy).',
      registers: [this.registry],
      collect() {
        this.set(sources.quarantinedCount())
      },
    })
    // Stock names (process_*, nodejs_*), as every Node.js dashboard expects them.
    collectDefaultMetrics({register: this.registry})
    for (const name of TOTAL_GAUGES) this.registry.removeSingleMetric(name)
    new Gauge({
      name: 'edgeworkers_host_connections_open',
      help: 'Client connections both network listeners hold (their budget: host.max_connections, or derived from the fd limit).',
      registers: [this.registry],
      collect() {
        this.set(sources.openConnections())
      },
    })
    new Gauge({
      name: 'edgeworkers_host_fence_active',
      help: '1 while a backup fence freezes host mutations.',
      registers: [this.registry],
      collect() {
        this.set(sources.fenceActive() ? 1 : 0)
      },
    })
    new Gauge({
      name: 'edgeworkers_host_scripts',
      help: 'Scripts by state (active, locked_down, retired).',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        for (const [state, count] of Object.entries(sources.scriptCounts())) this.set({state}, count)
      },
    })
  }

  /** A counter on this host's registry, labelled by `labelNames`. */
  /** `collect`: brings the counter up to date before each scrape reads it. */
  private counter<Label extends string>(name: string, help: string, labelNames: readonly Label[], collect?: () => Promise<void>): Counter<Label> {
    return new Counter({name, help, labelNames, registers: [this.registry], ...(collect ? {collect} : {})})
  }

  /** A per-Worker counter: `labelNames` start with `script`, and `department` follows it. */
  private workerCounter<Label extends string>(
    name: string,
    help: string,
    labelNames: readonly ['script', ...Label[]],
    collect?: () => Promise<void>,
  ): WorkerCounter<Label | 'script'> {
    const [, ...rest] = labelNames
    return new WorkerCounter(this.counter(name, help, ['script', 'department', ...rest], collect), (labels) => this.withDepartment(labels))
  }

  private withDepartment<Label extends string>(labels: LabelValues<Label>): LabelValues<Label | 'department'> {
    const script = (labels as LabelValues<'script'>).script
    const department = script === undefined || script === UNKNOWN_SCRIPT_LABEL ? null : this.sources.departmentOf(String(script))
    if (department === null) return labels as LabelValues<Label | 'department'>
    // Inserted right after `script`: the text format prints labels in the order they were given.
    const {script: _, ...rest} = labels as LabelValues<'script'>
    return {script, department, ...rest} as LabelValues<Label | 'department'>
  }
}

/** A counter or histogram whose series get the department label from the script they name. */
abstract class WorkerSeries<Label extends string, Metric extends Counter<Label | 'department'> | Histogram<Label | 'department'>> {
  constructor(
    protected readonly metric: Metric,
    protected readonly labelled: (labels: LabelValues<Label>) => LabelValues<Label | 'department'>,
  ) {}

  remove(labels: LabelValues<Label>): void {
    this.metric.remove(this.labelled(labels))
  }
}

class WorkerCounter<Label extends string> extends WorkerSeries<Label, Counter<Label | 'department'>> {
  inc(labels: LabelValues<Label>, value?: number): void {
    this.metric.inc(this.labelled(labels), value)
  }

  /** Removes every series of `script`, whatever its other labels (an open set, like statuses). */
  async removeScript(script: string): Promise<void> {
    const {values} = await this.metric.get()
    for (const {labels} of values) if ((labels as Record<string, unknown>).script === script) this.metric.remove(labels as LabelValues<Label | 'department'>)
  }
}

class WorkerHistogram<Label extends string> extends WorkerSeries<Label, Histogram<Label | 'department'>> {
  observe(labels: LabelValues<Label>, value: number): void {
    this.metric.observe(this.labelled(labels), value)
  }
}
