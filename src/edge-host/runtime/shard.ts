// One shard: a workerd process running a subset of the scripts, and the gate in front of it. workerd loads its whole config
// at start, so a deploy replaces the shard's process (a swap). The new config is written first; then, in one of two modes:
// - `hold` (the old or the new scripts use Durable Objects, whose files one process at a time may open): the gate closes (new
//   requests wait), requests inside finish (the front door's too), the old process stops, the new one starts, the gate opens;
// - `overlap` (no Durable Objects): the new process starts beside the old one, new requests go to it as soon as it listens,
//   and the old one stops once its requests are done — nothing waits.
// Restart requests arriving within the coalescing window, or while a swap runs, share the next swap. With the Worker Loader
// (host.code_loading = "loader", ../../workerd/loader-worker.ts) a deploy of a Worker without Durable Objects (or a change of
// its env) loads it into the running process's loader Worker under a new load id and switches its route (refresh) — no swap,
// neighbours untouched. A loaded Worker costs a second invocation per request, so once nothing changed for `settleMs` the
// shard swaps (overlap only) to a process running it on its own socket, unless a WebSocket or long stream is open
// (settleDecision); workerd never unloads a loaded Worker, so past `maxStaleLoads` replaced loads (or the watchdog's recycle
// memory) it swaps at once: a recycle. A Worker on its own socket is counted, not traced, unless a tail reads it: through the
// loader (./traced-requests.ts), or after a `traces` swap. A dead process is restarted with backoff; the watchdog replaces a
// runaway by restartNow(); both take the spare process when one is ready.
import {setTimeout as sleep} from 'node:timers/promises'
import type {Agent} from 'undici'
import type {RunnableScript} from '../../workerd/script.js'
import {anyUsesDurableObjects, LoadIds, ownSocketsOf, type LoadedScript, loadedEntry, loaderAtStart, planInPlaceLoad, settleDecision} from './loaded-scripts.js'
import {ProcessOutputRedaction} from './output-redaction.js'
import {ProcessLoads} from './process-loads.js'
import {ProcessRequests} from './process-requests.js'
import {probeHealth, shardAgent} from './shard-connections.js'
import {InFlight, ShardGate} from './shard-gate.js'
import {RestartQueue} from './restart-queue.js'
import {type Waiter, waiter} from '../../util/waiter.js'
import {usesDurableObjects} from '../../workerd/config.js'
import type {RestartReason, ScriptRoute, ShardLease, ShardOptions, ShardState, SwapMode} from './shard-types.js'
import type {WorkerdProcess} from '../../workerd/process.js'
import {ProcessOutput, retireProcess, type StartedProcess, startProcess, stopProcess} from './process-lifecycle.js'
import {TracedRequests} from './traced-requests.js'

export type {PreparedConfig, RestartReason, ScriptRoute, ShardLease, ShardOptions, ShardState, SwapEvent, SwapMode} from './shard-types.js'

/** A crash is blamed on a request only if it had run this long: a process killed from outside (or a deploy racing a request) should not count. */
const CRASH_SUSPECT_MIN_AGE_MS = 100

const STABLE_AFTER_MS = 60_000 // a process that ran this long before dying resets the crash backoff

/** Restarts whose shard serves nothing meanwhile: they take the spare process when there is one. */
const URGENT: ReadonlySet<RestartReason> = new Set(['runaway', 'crash'])

export class Shard {
  private readonly gate: ShardGate
  private process: WorkerdProcess | null = null
  private agent: Agent | null = null
  /** Settled when the current process is being replaced or stopped (see ShardLease.retired). */
  private processRetired: Waiter<void> = waiter()
  private startedAt = 0
  /** Script → what the running process serves of it. */
  private loaded = new Map<string, LoadedScript>()
  private readonly loadIds = new LoadIds()
  /** Loads the running process holds that no route uses any more (workerd never unloads them). */
  private staleLoads = 0
  /** The running process's loads (under the loader). */
  private loads: ProcessLoads | null = null
  /** In-place loads run one at a time. */
  private loading: Promise<unknown> = Promise.resolve()
  /** The running process's output redaction. */
  private outputRedaction: ProcessOutputRedaction | null = null
  /** Socket name → Unix path, of the running process. */
  private socketPaths: ReadonlyMap<string, string> = new Map()
  private readonly inFlight = new InFlight()
  /** Requests inside the running process, its answers, and whether it was replaced as a runaway. */
  private requests = new ProcessRequests(Promise.resolve())
  private readonly restartQueue: RestartQueue
  /** Replaced processes still finishing their requests (overlap mode). */
  private readonly retiring = new Set<Promise<void>>()
  private stopping = false
  /** The script blamed for the last runaway or crash (alone on a shard, nobody else waits for it). */
  private suspected: string | null = null
  /** A runaway process, stopped, kept until its replacement serves (see restartNow). */
  private condemned: WorkerdProcess | null = null
  restarts = 0
  private readonly tracedRequests: TracedRequests // a tailed Worker's requests through the loader

  constructor(private readonly options: ShardOptions) {
    this.gate = new ShardGate(options.onStateChange)
    this.tracedRequests = new TracedRequests(options, this.loadIds)
    this.restartQueue = new RestartQueue(
      options,
      (reason) => this.swap(reason),
      () => this.stopping,
    )
  }

  get index(): number {
    return this.options.index
  }

  get state(): ShardState {
    return this.gate.state
  }

  get scriptCount(): number {
    return this.loaded.size
  }

  /** The release generation of `script` that the running process serves, if any. */
  liveGeneration(script: string): string | undefined {
    return this.gate.open ? this.loaded.get(script)?.releaseGeneration : undefined
  }

  /** Whether the running process can trace `script` (workerd service name) for a tail: itself, or through its loader (./traced-requests.ts). */
  traces(script: string): boolean {
    return this.loads !== null || (this.loaded.get(script)?.traced ?? true)
  }

  /** Where the running process serves `script` (see unixConnector), if it does: a request a tail sees, through the loader. */
  routeOf(script: string): ScriptRoute | undefined {
    const entry = this.gate.open ? this.loaded.get(script) : undefined
    return entry && ((this.loads && this.tracedRequests.route(script, entry)) || {origin: `http://${entry.socket}`, loadId: entry.loadId})
  }

  /** Script → its own socket in the running process, for the front door (see ownSocketsOf); none while it does not serve. */
  ownSockets(): Map<string, string> {
    return this.gate.open ? ownSocketsOf(this.loaded, this.socketPaths) : new Map()
  }

  /** Settles once the running process holds `loadId` (undefined: it does); see ./process-loads.ts. */
  loadPending(loadId: string): Promise<void> | undefined {
    return this.loads?.pending(loadId)
  }

  /** The script release a load id of this shard's process (or the one it replaced) stands for. */
  codeFor(loadId: string): RunnableScript | undefined {
    return this.loadIds.lookup(loadId)
  }

  /** Picks up the shard's current scripts: a load in place (loadInPlace) where it can, else a swap; resolves once it serves them. */
  refresh(): Promise<void> {
    if (!this.options.codeLoading || this.restartQueue.busy || !this.gate.open) return this.requestRestart('deploy')
    const loaded = this.loading.then(() => this.loadInPlace())
    this.loading = loaded.catch(() => {})
    return loaded
  }

  /** Swaps the process if it holds replaced loads (the watchdog's memory check). */
  recycleIfStale(): void {
    if (this.staleLoads > 0 && !this.restartQueue.busy && !this.stopping) void this.requestRestart('recycle')
  }

  /** Starts the process; resolves once it is up (rejects if the first start fails). */
  start(): Promise<void> {
    return this.requestRestart('start')
  }

  /** Asks for a swap that picks up the current scripts; resolves when such a swap finished. */
  requestRestart(reason: RestartReason = 'deploy'): Promise<void> {
    return this.restartQueue.request(reason)
  }

  /** Waits until the process serves (held in a start or swap) and takes a lease on it; null if not within `holdTimeoutMs`. */
  async acquire(holdTimeoutMs: number, script: string): Promise<ShardLease | null> {
    if (!(await this.gate.passed(holdTimeoutMs, () => this.stopping))) return null
    this.inFlight.enter()
    const requests = this.requests
    const {left, abandonable} = requests.enter(script)
    const socketPaths = this.socketPaths
    let released = false
    return {
      dispatcher: this.agent!,
      exited: this.process!.exited,
      retired: this.processRetired.promise,
      socketPathOf: (route) => socketPaths.get(new URL(route.origin).hostname),
      replayable: () => requests.replayable(script),
      tunnelOpened: () => requests.tunnelOpened(),
      abandonable,
      release: (failed = false) => {
        if (released) return
        released = true
        left(failed)
        this.inFlight.leave()
      },
    }
  }

  /** The script of the oldest request inside the running process (or failed in it) that has run at least `minAgeMs`, or null. */
  suspect(minAgeMs = 0): string | null {
    return this.requests.suspect(minAgeMs)
  }

  /** The running process is loading Workers (under the loader): compiling holds its thread, legitimately. */
  get compiling(): boolean {
    return this.loads?.busy ?? false
  }

  /** How many answers the running process has given; grows while its thread is not held. */
  get answered(): number {
    return this.requests.answered
  }

  /** Connections to the running process's sockets while it serves, for reads that are no Worker's request (binding counts). */
  get servingAgent(): Agent | null {
    return this.gate.open ? this.agent : null
  }

  /** The pid of the running process, if it serves. */
  get pid(): number | null {
    return this.gate.open ? (this.process?.pid ?? null) : null
  }

  /** Asks the running process's health socket; resolves true when it answered. */
  async probe(): Promise<boolean> {
    const agent = this.agent
    const requests = this.requests
    if (!this.gate.open || !agent) return false
    const status = await probeHealth(agent)
    if (status !== null) requests.answered++
    return status === 200
  }

  /** Replaces a runaway now, no backoff: stopped (SIGSTOP) and kept while its replacement comes up, then killed (first, with Durable
   * Objects); other scripts' idempotent requests inside are given up at once (ProcessRequests.condemn) and replayed on the replacement. */
  restartNow(blamed: string | null): Promise<void> {
    const process = this.process
    if (!process || this.stopping) return Promise.resolve()
    this.suspected = blamed
    const agent = this.agent!
    this.process = null
    this.agent = null
    this.loads = null
    this.processRetired.resolve()
    const durable = anyUsesDurableObjects(this.loaded)
    this.loaded = new Map()
    this.gate.set('down')
    void agent.close() // no new requests; those inside are given up now (condemn) or end by their socket errors once it is killed
    this.requests.condemn(blamed)
    if (durable) void process.kill()
    else {
      process.pause()
      this.condemned = process
    }
    return this.requestRestart('runaway')
  }

  /** Kills a runaway kept while its replacement started; `replacement`: the pid now serving, if any. */
  private killCondemned(replacement: number | null): void {
    const condemned = this.condemned
    this.condemned = null
    if (!condemned) return
    void condemned.kill()
    this.options.log.warn({shard: this.index, workerdPid: condemned.pid, replacement}, 'runaway process killed')
  }

  async stop(): Promise<void> {
    this.stopping = true
    this.killCondemned(null)
    this.gate.wakeAll()
    await this.restartQueue.current?.catch(() => {}) // a process it starts is stopped just below
    await this.drained()
    await this.stopProcess()
    await Promise.all(this.retiring)
    this.gate.set('stopped')
  }

  private async loadInPlace(): Promise<void> {
    const process = this.process
    if (this.restartQueue.busy || !this.gate.open || !process) return this.requestRestart('deploy')
    const began = performance.now()
    const plan = planInPlaceLoad(this.loaded, this.options.loadScripts(), this.options.codeLoading!.runsInLoader)
    if (plan === 'swap') return this.requestRestart('deploy')
    const loads = plan.load.map((script) => ({script, loadId: this.loadIds.register(script)}))
    this.outputRedaction?.add(plan.load)
    try {
      const processLoads = this.loads
      if (!processLoads) throw new Error('the process is not serving')
      await Promise.all(loads.map(({loadId}) => processLoads.load(loadId)))
    } catch (error) {
      if (this.process !== process) return // it went (a crash, the watchdog): its successor reads the scripts itself
      this.options.log.warn({shard: this.index, err: error}, 'loading into the running process failed; swapping it')
      return this.requestRestart('deploy')
    }
    if (this.process !== process || !this.gate.open) return // replaced meanwhile: the new process read the scripts itself
    for (const {script, loadId} of loads) {
      if (this.loaded.has(script.name)) this.staleLoads++
      this.loaded.set(script.name, loadedEntry(script, loadId, true))
    }
    for (const name of plan.removed) if (this.loaded.delete(name)) this.staleLoads++
    this.options.onSwapped?.({reason: 'deploy', mode: 'load', seconds: (performance.now() - began) / 1000, scripts: loads.length})
    if (loads.length > 0)
      this.options.log.info({shard: this.index, loaded: loads.map(({loadId}) => loadId), staleLoads: this.staleLoads}, 'loaded into the running process')
    if (this.staleLoads >= this.options.codeLoading!.maxStaleLoads) void this.requestRestart('recycle')
    else this.settleLater()
  }

  private settleLater(): void {
    const decide = () => (this.gate.open ? settleDecision(this.loaded, this.staleLoads, this.requests) : 'never')
    this.restartQueue.requestLater('settle', this.options.codeLoading?.settleMs ?? 0, decide)
  }

  private async swap(reason: RestartReason): Promise<void> {
    const scripts = this.options.loadScripts()
    const runsInLoader = loaderAtStart(URGENT.has(reason), this.options.codeLoading)
    const onSwapPath = scripts.filter((script) => !runsInLoader(script))
    const began = performance.now()
    const running = this.process
    const mode: SwapMode = (running || this.condemned) && !anyUsesDurableObjects(this.loaded) && !scripts.some(usesDurableObjects) ? 'overlap' : 'hold'
    const redaction = new ProcessOutputRedaction(scripts)
    const log = (line: string, stream: 'stdout' | 'stderr') => this.options.log.info({shard: this.index, stream}, line)
    // Workers other than the suspect wait for it: a spare, when one is ready and the config names none of them.
    const urgent = URGENT.has(reason) && onSwapPath.length === 0 && scripts.some((script) => script.name !== this.suspected)
    const spare = urgent ? (this.options.spare?.take() ?? null) : null
    if (spare) spare.output.route(log, redaction.redact)
    const prepared = spare ? null : await this.options.prepare(onSwapPath)
    if (mode === 'hold') {
      this.killCondemned(null)
      this.gate.set(running ? 'swapping' : 'starting')
      await this.drained()
      await this.stopProcess()
      if (this.stopping) {
        await (spare ? spare.process.stop() : Promise.all([prepared!.discard(), prepared!.release()]))
        return
      }
    }
    const outcome = spare
      ? {ok: true as const, started: spare}
      : await startProcess(prepared!, new ProcessOutput(log, redaction.redact), {...this.options, label: `shard-${this.index}`})
    if (!outcome.ok) {
      this.killCondemned(null)
      // In overlap mode the old process still serves; in hold mode it is gone.
      if (mode === 'hold') this.gate.set('down')
      throw new Error(`shard ${this.index} did not start: ${outcome.error}`)
    }
    const started = outcome.started.process
    // A runaway kill (restartNow) while this process started has already taken the old one down.
    const replaced = mode === 'overlap' && this.process && this.agent ? {process: this.process, agent: this.agent, retired: this.processRetired} : null
    const replacedSockets = this.socketPaths
    this.adopt(outcome.started, scripts, runsInLoader)
    this.outputRedaction = redaction
    if (replaced) this.retire(replaced, replacedSockets)
    this.restarts++
    this.options.onSwapped?.({reason, mode, seconds: (performance.now() - began) / 1000, scripts: scripts.length})
    this.options.log.info({shard: this.index, reason, mode, scripts: scripts.length, workerdPid: started.pid, spare: spare !== null}, 'shard serving')
    this.killCondemned(started.pid)
  }

  /** Stops a replaced process once the requests it still serves are done, or the drain timeout passed. */
  private retire(replaced: {process: WorkerdProcess; agent: Agent; retired: Waiter<void>}, sockets: ReadonlyMap<string, string>): void {
    replaced.retired.resolve()
    const retiring = retireProcess(replaced.process, replaced.agent, this.options, sockets)
    this.retiring.add(retiring)
    void retiring.finally(() => this.retiring.delete(retiring))
  }

  private adopt({process, socketPaths, traced}: StartedProcess, scripts: RunnableScript[], runsInLoader: (script: RunnableScript) => boolean): void {
    this.process = process
    this.processRetired = waiter()
    this.startedAt = Date.now()
    this.requests = new ProcessRequests(process.exited)
    this.socketPaths = socketPaths
    this.agent = shardAgent(socketPaths)
    const requests = this.requests
    this.loads = this.options.codeLoading ? new ProcessLoads(this.agent, this.options.startTimeoutMs, () => requests.answered++) : null
    this.loadIds.newProcess()
    this.tracedRequests.clear()
    this.staleLoads = 0
    const requestsOnly = (script: RunnableScript) => this.options.codeLoading?.runsInLoader(script) ?? false
    const loadIdOf = (script: RunnableScript) => (runsInLoader(script) ? this.loadIds.register(script) : null) // loaded by its first request: a start compiles none
    this.loaded = new Map(scripts.map((script) => [script.name, loadedEntry(script, loadIdOf(script), requestsOnly(script), traced.has(script.name))]))
    this.settleLater() // a runaway's or a crash's replacement left its Workers to the loader
    void process.exited.then((exit) => {
      if (this.process !== process) return // replaced or stopped on purpose
      const suspect = this.suspect(CRASH_SUSPECT_MIN_AGE_MS)
      this.options.log.error({shard: this.index, ...exit, suspect}, 'workerd exited unexpectedly; restarting the shard')
      this.options.onCrash?.(suspect)
      this.suspected = suspect
      this.process = null
      // close, not destroy: requests inside end by their own socket errors (which tell whether they
      // may be replayed); a request that tries it afterwards is refused before anything is sent.
      void this.agent?.close()
      this.agent = null
      this.loads = null
      this.gate.set('down')
      if (Date.now() - this.startedAt > STABLE_AFTER_MS) this.restartQueue.resetCrashBackoff()
      void sleep(suspect === null ? this.restartQueue.nextCrashBackoff() : 0).then(() => {
        if (!this.stopping) void this.requestRestart('crash')
      })
    })
    this.gate.set('up')
  }

  /** The requests inside the running process have ended, the host's and the front door's, or the drain timeout passed. */
  private async drained(): Promise<void> {
    const {drainTimeoutMs, outsideRequestsDone, log} = this.options
    const warn = (inFlight: number) => log.warn({shard: this.index, inFlight}, 'drain timed out; stopping the shard anyway')
    await Promise.all([this.inFlight.drained(drainTimeoutMs, warn), outsideRequestsDone?.(this.socketPaths, drainTimeoutMs)])
  }

  private async stopProcess(): Promise<void> {
    const process = this.process
    const agent = this.agent
    this.processRetired.resolve()
    this.process = null
    this.agent = null
    this.loads = null
    this.loaded = new Map()
    await stopProcess(process, agent, this.inFlight.count === 0, this.options.beforeStop)
  }
}
