// The workerd runtime of one host: N shards (and the own shards of Workers that caused an
// incident, see Scripts.isolate), the module cache their configs embed from, and the
// validation sandboxes every upload passes before it may join a shard (./validator.ts,
// ../../workerd/sandbox.ts). Its files under the data dir: ./data-dir-paths.ts.
import {randomBytes, randomUUID} from 'node:crypto'
import {existsSync, readFileSync} from 'node:fs'
import type http from 'node:http'
import {mkdir, readdir, rm} from 'node:fs/promises'
import path from 'node:path'
import type {Logger} from 'pino'
import type {Agent} from 'undici'
import {writeFileAtomically} from '../../util/atomic-file.js'
import {listenOnPrivateSocket} from '../http/common.js'
import {type RunnableScript, scriptOfService, splitServiceName} from '../../workerd/script.js'
import {createCodeServer} from './code-server.js'
import {ProcessOutputRedaction} from './output-redaction.js'
import {SpareProcess} from './process-lifecycle.js'
import {Shard, type PreparedConfig, type ShardState, type SwapEvent} from './shard.js'
import {Validator} from './validator.js'
import {Watchdog, type IncidentKind} from './watchdog.js'
import {LOADER_SOCKET} from '../../workerd/loader-worker.js'
import {HEALTH_SOCKET, renderShardConfig, renderValidationConfig, usesDurableObjects, workersOf, type RenderOptions} from '../../workerd/config.js'
import {socketPathsIn, unixAddressOf, writeConfig} from '../../workerd/config-files.js'
import {killRecordedLeftovers} from '../../workerd/process.js'
import {runValidationSandbox, type ValidationOutcome} from '../../workerd/sandbox.js'
import {CRON_SOCKET, usesCrons} from '../../workerd/cron-config.js'
import {BINDING_METRICS_SOCKET} from '../../workerd/binding-metrics.js'
import {WORKER_COUNTS_SOCKET} from '../../workerd/worker-counts.js'
import {d1Sockets} from '../../workerd/d1-config.js'
import type {KvSizeLimits} from '../../workerd/kv-worker.js'
import {queueSockets, usesQueueConsumers} from '../../workerd/queue-config.js'
import {codeSocketPath, durableObjectRoot, serviceBindingSocketPath, tailSocketPath} from './data-dir-paths.js'

export interface RuntimeOptions {
  dataDir: string
  shardCount: number
  coalesceWindowMs: number
  drainTimeoutMs: number
  startTimeoutMs: number
  egressAllow: string[]
  /** host.kv_max_*_bytes: what Workers' KV namespaces refuse past. */
  kvSizes: KvSizeLimits
  /** host.experimental: workerd runs with `--experimental`. */
  experimental: boolean
  /** host.worker_events: Workers' events exist (traces for the shard's tail Worker, or the counting main module). */
  workerEvents: boolean
  /** Whether someone reads the traces of `script` (a live tail, the Worker log file); Workers with Durable Objects are always traced. */
  tracesWanted(script: string): boolean
  /** host.tail_max_events_per_second: a tailed Worker's requests a second that go through the loader, traced (./traced-requests.ts). */
  tracedRequestsPerSecond: number
  /** A request of a tailed Worker its tail did not see (over that share). */
  onUntracedRequest(script: string): void
  /**
   * host.code_loading: "loader" runs Workers without Durable Objects through each shard's loader
   * Worker (a deploy loads them in place); "restart" runs every Worker on its own socket (a deploy
   * swaps its shard's process).
   */
  codeLoading: 'restart' | 'loader'
  /** Replaced loads a shard's process may hold before it is recycled (host.loader_max_stale_loads). */
  maxStaleLoads: number
  /** A shard that loaded Workers swaps to a process running them on their own sockets this long after its last load (host.loader_settle_seconds; 0: never). */
  loaderSettleMs: number
  /** Past this resident memory a shard holding replaced loads is recycled (host.loader_recycle_memory_mb). */
  recycleMemoryBytes: number
  /** At most this many validation sandboxes run at once (uploads arriving meanwhile share the next). */
  validationConcurrency: number
  /** The scripts shard `index` must run, read at each swap. */
  scriptsOfShard(index: number): RunnableScript[]
  /** Bytes of a stored module. */
  moduleContent(sha256: string): Buffer
  log: Logger
  onShardState?(index: number, state: ShardState): void
  onSwapped?(index: number, event: SwapEvent): void
  /** The watchdog's limits (./watchdog.ts). */
  watchdogIntervalMs: number
  cpuLimitMs: number
  memoryLimitBytes: number
  /** A runaway or a crash on shard `index`, blamed on `script` when a request of it was inside. */
  onIncident(index: number, kind: IncidentKind, script: string | null): void
  /** See ShardOptions.outsideRequestsDone. */
  outsideRequestsDone?(socketPaths: ReadonlyMap<string, string>, timeoutMs: number): Promise<void>
  /** See WatchdogOptions.suspectOutsideHost. */
  suspectOutsideHost?(shard: Shard): Promise<string | null>
  /** host.spare_process: under the loader, keep a workerd started for the next runaway's or crash's replacement. */
  spareProcess: boolean
  onSpareReady?(ready: boolean): void
  /** A shard's drained process is about to be stopped (see ShardOptions.beforeStop). */
  beforeStop?(agent: Agent): Promise<void>
}

export class WorkerdRuntime {
  /** Shard index → shard: 0 … shardCount − 1, then the own shards of Workers that caused an incident (addShard). */
  private readonly shardsByIndex = new Map<number, Shard>()
  private started = false
  private readonly runtimeDir: string
  private readonly modulesDir: string
  private readonly validator: Validator
  private readonly watchdog: Watchdog
  /** Callers waiting for what some shard serves to change (see nextSwap). */
  private readonly swapWaiters = new Set<() => void>()
  private waitsEnded = false
  /** The loader Workers' code listener (code_loading = "loader"). */
  private codeServer: http.Server | null = null
  private readonly spare: SpareProcess | null

  constructor(private readonly options: RuntimeOptions) {
    this.runtimeDir = path.join(options.dataDir, 'runtime')
    this.modulesDir = path.join(this.runtimeDir, 'modules')
    this.validator = new Validator((scripts, modules) => this.runSandbox(scripts, modules), options.validationConcurrency)
    this.spare =
      options.codeLoading === 'loader' && options.spareProcess
        ? new SpareProcess({
            prepare: () => this.prepareConfig('spare', []),
            pidDir: this.pidDir,
            startTimeoutMs: options.startTimeoutMs,
            log: options.log,
            onReady: options.onSpareReady,
          })
        : null
    for (let index = 0; index < options.shardCount; index++) this.addShard(index)
    this.watchdog = new Watchdog({
      shards: () => this.shards,
      intervalMs: options.watchdogIntervalMs,
      cpuLimitMs: options.cpuLimitMs,
      memoryLimitBytes: options.memoryLimitBytes,
      recycleMemoryBytes: options.codeLoading === 'loader' ? options.recycleMemoryBytes : null,
      onIncident: options.onIncident,
      suspectOutsideHost: options.suspectOutsideHost,
      log: options.log,
    })
  }

  /** Every shard, by index. */
  get shards(): Shard[] {
    return [...this.shardsByIndex.values()].sort((a, b) => a.index - b.index)
  }

  shard(index: number): Shard | undefined {
    return this.shardsByIndex.get(index)
  }

  /**
   * Adds shard `index` if there is none yet (a Worker's own shard, see Scripts.isolate); once the
   * runtime has started, the shard starts at once, in the background (failed starts are retried).
   */
  addShard(index: number): void {
    if (this.shardsByIndex.has(index)) return
    const options = this.options
    const shard = new Shard({
      index,
      loadScripts: () => options.scriptsOfShard(index),
      prepare: (scripts) => this.prepareConfig(`shard-${index}`, scripts),
      spare: this.spare,
      codeLoading:
        options.codeLoading === 'loader'
          ? {
              runsInLoader: (script) => !usesDurableObjects(script) && !usesCrons(script),
              maxStaleLoads: options.maxStaleLoads,
              settleMs: options.loaderSettleMs,
            }
          : null,
      pidDir: this.pidDir,
      coalesceWindowMs: options.coalesceWindowMs,
      drainTimeoutMs: options.drainTimeoutMs,
      startTimeoutMs: options.startTimeoutMs,
      log: options.log,
      onStateChange: (state) => options.onShardState?.(index, state),
      onSwapped: (event) => {
        options.onSwapped?.(index, event)
        for (const wake of this.swapWaiters) wake()
      },
      onCrash: (suspect) => options.onIncident(index, 'crash', suspect),
      beforeStop: options.beforeStop,
      outsideRequestsDone: options.outsideRequestsDone,
      tracesWanted: (service) => options.tracesWanted(scriptOfService(service).script),
      tracedRequests: {perSecond: options.tracedRequestsPerSecond, onSampled: (service) => options.onUntracedRequest(scriptOfService(service).script)},
    })
    this.shardsByIndex.set(index, shard)
    if (this.started) shard.start().catch((error: unknown) => options.log.error({shard: index, err: error}, 'shard failed to start'))
  }

  /** Has each shard serving `script` (or its split release) trace it: a swap where its process cannot (no loader); resolves once they do. */
  async traceScript(script: string): Promise<void> {
    const untraced = this.shards.filter((shard) => !shard.traces(script) || !shard.traces(splitServiceName(script)))
    await Promise.all(untraced.map((shard) => shard.requestRestart('traces')))
  }

  /** Starts every shard; resolves when each has come up or failed its first start (then it retries). */
  async start(): Promise<void> {
    await mkdir(this.modulesDir, {recursive: true, mode: 0o700})
    await mkdir(this.pidDir, {recursive: true, mode: 0o700})
    await this.killLeftoverProcesses()
    await rm(path.join(this.runtimeDir, 'validate'), {recursive: true, force: true})
    await rm(path.join(this.runtimeDir, 'sock'), {recursive: true, force: true})
    if (this.options.codeLoading === 'loader') await this.startCodeServer()
    this.started = true
    const shards = this.shards
    const results = await Promise.allSettled(shards.map((shard) => shard.start()))
    results.forEach((result, position) => {
      if (result.status === 'rejected') this.options.log.error({shard: shards[position]!.index, err: result.reason}, 'shard failed to start')
    })
    this.watchdog.start()
    this.spare?.fill()
  }

  async stop(): Promise<void> {
    this.started = false
    this.watchdog.stop()
    await Promise.all([...this.shards.map((shard) => shard.stop()), this.spare?.stop()])
    const codeServer = this.codeServer
    this.codeServer = null
    if (codeServer) await new Promise((resolve) => codeServer.close(resolve))
  }

  private async startCodeServer(): Promise<void> {
    const server = createCodeServer(
      (loadId) => this.shards.map((shard) => shard.codeFor(loadId)).find((script) => script !== undefined),
      // The module cache first: it keeps every validated release's modules for the life of the host
      // process, while the host state drops a release's modules as soon as a newer one replaces it —
      // and a swap under way may still load the replaced release before it loads the new one.
      (sha256) => {
        const cached = path.join(this.modulesDir, sha256)
        return existsSync(cached) ? readFileSync(cached) : this.options.moduleContent(sha256)
      },
    )
    await listenOnPrivateSocket(server, codeSocketPath(this.options.dataDir))
    this.codeServer = server
  }

  /** Every shard is up. */
  ready(): boolean {
    return this.shards.every((shard) => shard.state === 'up')
  }

  /**
   * Has a shard pick up changed scripts: loaded in place under the loader where it can, else by a
   * swap (restarts asked for together share one). See Shard.refresh.
   */
  refreshShard(index: number): Promise<void> {
    return this.shardsByIndex.get(index)?.refresh() ?? Promise.resolve()
  }

  /** The release generation of a script live in its shard's running process, if any. */
  liveGeneration(script: string, shard: number | null): string | undefined {
    return shard === null ? undefined : this.shardsByIndex.get(shard)?.liveGeneration(script)
  }

  /**
   * Resolves once any shard finished a swap (what it serves changed) or after `timeoutMs`, with true;
   * false once the host stops (see endWaits): nothing will change any more.
   */
  nextSwap(timeoutMs: number): Promise<boolean> {
    if (this.waitsEnded) return Promise.resolve(false)
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer)
        this.swapWaiters.delete(wake)
        resolve(!this.waitsEnded)
      }
      const timer = setTimeout(wake, timeoutMs)
      this.swapWaiters.add(wake)
    })
  }

  /** Ends every wait for a swap now and from now on: a stopping host must not be held open by them. */
  endWaits(): void {
    this.waitsEnded = true
    for (const wake of this.swapWaiters) wake()
  }

  /**
   * Validates a script before it may join a shard (see ./validator.ts). `modules` holds the bytes of
   * modules not stored yet.
   */
  validate(script: RunnableScript, modules: Map<string, Buffer>): Promise<ValidationOutcome> {
    return this.validator.validate(script, modules)
  }

  private async runSandbox(scripts: RunnableScript[], modules: Map<string, Buffer>): Promise<ValidationOutcome> {
    for (const script of scripts) await this.cacheModules(script, (sha256) => modules.get(sha256) ?? this.options.moduleContent(sha256))
    const dir = path.join(this.runtimeDir, 'validate', shortId())
    const outcome = await runValidationSandbox(
      dir,
      scripts.map((script) => script.name),
      (socketAddress) => renderValidationConfig(scripts, {...this.renderOptions(), socketAddress}),
      {
        startTimeoutMs: this.options.startTimeoutMs,
        experimental: this.options.experimental,
        pidRecord: {dir: this.pidDir, label: 'validate'},
        // A refusal quotes workerd's errors back to the kit: no secret value of the sandbox's scripts in them.
        redactOutput: new ProcessOutputRedaction(scripts).redact,
      },
    )
    this.options.log.debug({scripts: scripts.map((script) => script.name), ok: outcome.ok}, 'validation sandbox')
    return outcome
  }

  /** Removes cached module files no stored script uses any more. */
  async pruneModuleCache(referenced: Set<string>): Promise<void> {
    const files = existsSync(this.modulesDir) ? await readdir(this.modulesDir) : []
    await Promise.all(files.filter((file) => !referenced.has(file)).map((file) => rm(path.join(this.modulesDir, file), {force: true})))
  }

  private renderOptions(): Omit<RenderOptions, 'socketAddress'> {
    // Configs sit two levels below runtime/ (shard-<i>/<id>/ and validate/<id>/).
    return {
      modulePath: (sha256) => `../../modules/${sha256}`,
      egressAllow: this.options.egressAllow,
      kvSizes: this.options.kvSizes,
      serviceBindingAddress: `unix:${serviceBindingSocketPath(this.options.dataDir)}`,
    }
  }

  /** Writes a config for `scripts` (under the loader, the loader Worker too) in runtime/<dir>/. */
  private async prepareConfig(dir: string, scripts: RunnableScript[]): Promise<PreparedConfig> {
    for (const script of scripts) await this.cacheModules(script, (sha256) => this.options.moduleContent(sha256))
    // A split release keeps its data in its Worker's storage (workersOf).
    const workers = workersOf(scripts)
    for (const worker of workers.filter(usesDurableObjects)) await mkdir(durableObjectRoot(this.options.dataDir, worker.name), {recursive: true, mode: 0o700})
    const configDir = path.join(this.runtimeDir, dir, randomUUID())
    // The sockets outlive the config: they belong to the process, and go once it exited.
    const socketDir = path.join(this.runtimeDir, 'sock', shortId())
    await mkdir(socketDir, {recursive: true, mode: 0o700})
    const socketPaths = socketPathsIn(socketDir, [
      HEALTH_SOCKET,
      LOADER_SOCKET,
      CRON_SOCKET,
      BINDING_METRICS_SOCKET,
      WORKER_COUNTS_SOCKET,
      ...scripts.map((script) => script.name),
      ...d1Sockets(workers),
      ...queueSockets(workers),
    ])
    const traced = new Set(
      scripts.filter((script) => usesDurableObjects(script) || this.options.tracesWanted(scriptOfService(script.name).script)).map(({name}) => name),
    )
    const config = renderShardConfig(scripts, {
      ...this.renderOptions(),
      socketAddress: unixAddressOf(socketPaths),
      durableObjectRoot: (script) => durableObjectRoot(this.options.dataDir, script),
      tailSinkAddress: this.options.workerEvents ? `unix:${tailSocketPath(this.options.dataDir)}` : null,
      traced: (script) => traced.has(script.name),
      loaderCodeAddress: this.options.codeLoading === 'loader' ? `unix:${codeSocketPath(this.options.dataDir)}` : null,
      experimental: this.options.experimental,
    })
    const configPath = await writeConfig(configDir, config.text)
    return {
      configPath,
      sockets: config.sockets,
      socketPaths,
      traced: this.options.workerEvents ? traced : new Set(),
      cwd: configDir,
      // The Worker Loader, the cron Worker's scheduled() calls and the queue service's queue() calls
      // exist only in workerd's experimental mode; uploads still pass the validation sandbox under
      // host.experimental, so a Worker gains no experimental flag by it.
      experimental:
        this.options.experimental || this.options.codeLoading === 'loader' || config.sockets.includes(CRON_SOCKET) || scripts.some(usesQueueConsumers),
      discard: () => rm(configDir, {recursive: true, force: true}),
      release: () => rm(socketDir, {recursive: true, force: true}),
    }
  }

  /** Deletes a script's Durable Object storage (its KV, D1, R2 and queue data with it); false when it had none. */
  async removeDurableObjectData(script: string): Promise<boolean> {
    const root = durableObjectRoot(this.options.dataDir, script)
    if (!existsSync(root)) return false
    await rm(root, {recursive: true, force: true})
    return true
  }

  private async cacheModules(script: RunnableScript, contentOf: (sha256: string) => Buffer): Promise<void> {
    for (const module of script.modules) {
      const file = path.join(this.modulesDir, module.sha256)
      if (existsSync(file)) continue
      await writeFileAtomically(file, contentOf(module.sha256))
    }
  }

  private get pidDir(): string {
    return path.join(this.runtimeDir, 'pids')
  }

  /**
   * A host killed where workerd has no parent-death signal leaves its workerd children running,
   * holding Durable Object files the new shards are about to open: kill the ones it recorded.
   */
  private async killLeftoverProcesses(): Promise<void> {
    for (const pid of await killRecordedLeftovers(this.pidDir))
      this.options.log.warn({workerdPid: pid}, 'killed a workerd left over from a previous host process')
    const entries = existsSync(this.runtimeDir) ? await readdir(this.runtimeDir) : []
    await Promise.all(
      entries.filter((entry) => /^(shard-\d+|spare)$/.test(entry)).map((entry) => rm(path.join(this.runtimeDir, entry), {recursive: true, force: true})),
    )
  }
}

function shortId(): string {
  return randomBytes(4).toString('hex')
}
