// What a shard (./shard.ts) is given and hands out: its options, the config it starts on, the events
// it reports and the lease a request holds on its running process.
import type {Logger} from 'pino'
import type {Agent} from 'undici'
import type {RunnableScript} from '../../workerd/script.js'
import type {StartedProcess} from './process-lifecycle.js'

export type ShardState = 'stopped' | 'starting' | 'up' | 'swapping' | 'down'

/** A written config, ready to start; `discard` removes it once workerd has read it. */
export interface PreparedConfig {
  configPath: string
  /** The sockets the process reports once it listens: one per script on the swap path, named after it (and the loader's). */
  sockets: string[]
  /** Socket name → its Unix socket path. */
  socketPaths: ReadonlyMap<string, string>
  /** The scripts on their own sockets whose traces go to the tail Worker; the others are counted (../../workerd/worker-counts.ts). */
  traced: ReadonlySet<string>
  cwd: string
  /** Start workerd with `--experimental` (host.experimental). */
  experimental: boolean
  discard(): Promise<void>
  /** Removes the sockets' directory; called once the process started on this config has exited. */
  release(): Promise<void>
}

export interface ShardOptions {
  index: number
  /** The scripts this shard must run now (read at each swap). */
  loadScripts(): RunnableScript[]
  /** Writes a config for `scripts`, the ones on the swap path (the loader Worker is in it whenever codeLoading is set). */
  prepare(scripts: RunnableScript[]): Promise<PreparedConfig>
  /** host.code_loading = "loader": which scripts the loader Worker runs, and the bound on replaced loads. */
  /** `settleMs`: after the last load, the process is swapped for one running every Worker on its own socket (0: never). */
  codeLoading: {runsInLoader(script: RunnableScript): boolean; maxStaleLoads: number; settleMs: number} | null
  /** A process started ahead of need, taken by a runaway's or a crash's replacement (./process-lifecycle.ts); null: none. */
  spare: {take(): StartedProcess | null} | null
  /** Where workerd processes are recorded while they run, so a later host can clean up after a crash. */
  pidDir: string
  coalesceWindowMs: number
  drainTimeoutMs: number
  startTimeoutMs: number
  log: Logger
  onStateChange?(state: ShardState): void
  /** `seconds`: from the swap's start until the new process serves (requests waited that long in `hold` mode). */
  onSwapped?(event: SwapEvent): void
  /** The process died on its own; `suspect` is the script whose request was oldest inside it, if any. */
  onCrash?(suspect: string | null): void
  /** A drained process is about to be stopped (a swap in `hold` mode, or the host's stop): last reads of it. */
  beforeStop?(agent: Agent): Promise<void>
  /** Resolves once requests that reached a replaced process past the host (the front door's fast path, by its socket paths) have ended, or after `timeoutMs`. */
  outsideRequestsDone?(socketPaths: ReadonlyMap<string, string>, timeoutMs: number): Promise<void>
  /** Whether someone reads the traces of workerd service `service` (a script, or its split release). */
  tracesWanted(service: string): boolean
  /** A tailed Worker's requests through the loader, per second (./traced-requests.ts), and those it did not see. */
  tracedRequests: {perSecond: number; onSampled(service: string): void}
}

/**
 * `settle`: loads into the running process settled (ShardOptions codeLoading.settleMs); `recycle`: it holds too many
 * replaced ones; `traces`: someone tails a script the process neither traces nor can through a loader (code_loading = "restart").
 */
export type RestartReason = 'start' | 'deploy' | 'crash' | 'runaway' | 'recycle' | 'settle' | 'traces'
/** `load`: no swap — changed Workers were loaded into the running process (the loader). */
export type SwapMode = 'hold' | 'overlap' | 'load'
/** What the shard serves changed; `scripts`: how many it runs (after a swap) or loaded (`load`). */
export interface SwapEvent {
  reason: RestartReason
  mode: SwapMode
  seconds: number
  scripts: number
}

/** Where the running process serves a script: the origin of its socket, and its load id under the loader. */
export interface ScriptRoute {
  origin: string
  loadId: string | null
}

/** A request's hold on the running process; release it when the response is done. */
export interface ShardLease {
  /** Keep-alive connections to the process's sockets. */
  dispatcher: Agent
  /** Settles when the process this lease points at has exited (a crash, or a swap). */
  exited: Promise<unknown>
  /**
   * Settles when that process stops taking new work (a swap or stop begins). Connections that
   * outlive their request — WebSockets — close then, so a swap never waits for them.
   */
  retired: Promise<void>
  /** The Unix socket of `route` in that process (for connections undici does not make: upgrades). */
  socketPathOf(route: ScriptRoute): string | undefined
  /** A WebSocket was spliced to that process: no settle swap while it is open; the returned function says it closed. */
  tunnelOpened(): () => void
  /**
   * The process was killed as a runaway another script caused: a request of this lease that failed
   * in it may be sent again if it is idempotent (it cannot have caused the incident).
   */
  replayable(): boolean
  /**
   * `abandon` is called if the process is stopped as a runaway another script caused while this
   * lease's request is inside (then replayable() holds): the request is given up at once.
   */
  abandonable(abandon: () => void): void
  /** `failed`: the request ended by an error; it stays a suspect should the process turn out dead. */
  release(failed?: boolean): void
}
