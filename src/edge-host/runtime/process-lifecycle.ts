// Starting and ending a shard's workerd processes, and the spare.
//
// The spare: a workerd process started before it is needed, so a shard whose process must go at once (a
// runaway the watchdog replaces, a process that died) serves again without waiting for workerd to
// start: on a loaded machine that start takes seconds, every one of them an outage for the shard's
// other Workers. Under the loader, a shard whose Workers all run in its loader Worker has a config
// that names none of them, the same for every shard: one spare stands in for any of them. The
// shard that takes it routes its output through its own log fields and redaction. The next spare
// starts a moment after a take, so its start does not compete with the neighbours' first loads.
import {setTimeout as sleep} from 'node:timers/promises'
import type {Logger} from 'pino'
import type {Agent} from 'undici'
import {WorkerdProcess} from '../../workerd/process.js'
import type {PreparedConfig, ShardOptions} from './shard-types.js'

/** Where a process's output lines go: re-pointed when a spare joins a shard. */
export class ProcessOutput {
  constructor(
    private sink: (line: string, stream: 'stdout' | 'stderr') => void,
    private redactor: (line: string) => string,
  ) {}

  route(sink: (line: string, stream: 'stdout' | 'stderr') => void, redactor: (line: string) => string): void {
    this.sink = sink
    this.redactor = redactor
  }

  readonly redact = (line: string): string => this.redactor(line)
  readonly emit = (line: string, stream: 'stdout' | 'stderr'): void => this.sink(line, stream)
}

/** A process that listens, the sockets of its config, and where its output goes. */
export interface StartedProcess {
  process: WorkerdProcess
  socketPaths: ReadonlyMap<string, string>
  /** The scripts whose traces go to the tail Worker (PreparedConfig.traced). */
  traced: ReadonlySet<string>
  output: ProcessOutput
}

export interface ProcessStart {
  pidDir: string
  startTimeoutMs: number
}

/** Starts workerd on `prepared`; the config files go once it read them, the sockets once it exited. */
export async function startProcess(
  prepared: PreparedConfig,
  output: ProcessOutput,
  options: ProcessStart & {label: string},
): Promise<{ok: true; started: StartedProcess} | {ok: false; error: string}> {
  let outcome: Awaited<ReturnType<typeof WorkerdProcess.start>>
  try {
    outcome = await WorkerdProcess.start({
      configPath: prepared.configPath,
      sockets: prepared.sockets,
      cwd: prepared.cwd,
      startTimeoutMs: options.startTimeoutMs,
      experimental: prepared.experimental,
      pidRecord: {dir: options.pidDir, label: options.label},
      onOutput: output.emit,
      redactOutput: output.redact,
    })
  } finally {
    await prepared.discard()
  }
  if (!outcome.ok) {
    await prepared.release()
    return outcome
  }
  void outcome.process.exited.then(() => prepared.release())
  return {ok: true, started: {process: outcome.process, socketPaths: prepared.socketPaths, traced: prepared.traced, output}}
}

/**
 * How long a drained process gets to exit on SIGTERM before it is killed. Nothing of the host's is
 * inside it then, but workerd keeps waiting for idle Durable Objects — one that held hibernatable
 * WebSockets (closed by the host as the swap began) keeps it alive ~10 s, and requests for the
 * shard are held all that time. Their storage is committed; only work nobody waits for is cut.
 */
const QUIET_STOP_GRACE_MS = 1_000

/**
 * Stops a process no request uses any more (`drained`), or, after a drain timeout, cuts the ones
 * still inside. A drained process is first given to `beforeStop` (reads of what it counted).
 */
export async function stopProcess(
  process: WorkerdProcess | null,
  agent: Agent | null,
  drained: boolean,
  beforeStop?: (agent: Agent) => Promise<void>,
): Promise<void> {
  if (drained && agent && beforeStop) await beforeStop(agent)
  await (drained ? agent?.close() : agent?.destroy())
  await process?.stop(drained ? QUIET_STOP_GRACE_MS : undefined)
}

/** Stops a replaced process once the requests it still serves are done, or once `drainTimeoutMs` passed. */
/** Requests that reached the process past the host's agent (the front door's, by its `sockets`) are waited for first, within the same timeout. */
export async function retireProcess(
  process: WorkerdProcess,
  agent: Agent,
  {drainTimeoutMs, outsideRequestsDone}: Pick<ShardOptions, 'drainTimeoutMs' | 'outsideRequestsDone'>,
  sockets: ReadonlyMap<string, string>,
): Promise<void> {
  // A request that never ends (a Worker spinning in a loop) must not keep the process alive.
  await outsideRequestsDone?.(sockets, drainTimeoutMs)
  const closed = agent.close()
  if ((await Promise.race([closed.then(() => 'closed'), sleep(drainTimeoutMs)])) !== 'closed') await agent.destroy()
  await process.stop()
}

/** A spare's start waits this long after a take or an exit; after a failed start, longer. */
const REFILL_DELAY_MS = 1_000
const RETRY_DELAY_MS = 30_000

export class SpareProcess {
  private ready: StartedProcess | null = null
  private starting: Promise<void> | null = null
  private refill: NodeJS.Timeout | null = null
  private stopped = false

  constructor(
    private readonly options: ProcessStart & {
      /** Writes the config every loader-only shard starts on. */
      prepare(): Promise<PreparedConfig>
      log: Logger
      onReady?(ready: boolean): void
    },
  ) {}

  /** Starts a spare in the background unless one is ready or on its way. */
  fill(): void {
    if (this.stopped || this.ready !== null || this.starting !== null) return
    this.starting = this.startOne()
      .catch((error: unknown) => {
        this.options.log.warn({err: error}, 'spare workerd could not be prepared')
        this.fillLater(RETRY_DELAY_MS)
      })
      .finally(() => {
        this.starting = null
      })
  }

  /** The ready spare, now the caller's; null when none is ready (one still starting is not waited for). */
  take(): StartedProcess | null {
    const taken = this.ready
    this.ready = null
    if (taken) this.options.onReady?.(false)
    if (taken) this.fillLater(REFILL_DELAY_MS)
    return taken
  }

  private fillLater(delayMs: number): void {
    if (this.stopped || this.refill) return
    this.refill = setTimeout(() => {
      this.refill = null
      this.fill()
    }, delayMs)
    this.refill.unref()
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.refill) clearTimeout(this.refill)
    await this.starting
    const spare = this.ready
    this.ready = null
    await spare?.process.stop()
  }

  private async startOne(): Promise<void> {
    const log = this.options.log
    const output = new ProcessOutput(
      (line, stream) => log.info({spare: true, stream}, line),
      (line) => line, // a spare has run no Worker: nothing of theirs to hide yet
    )
    const outcome = await startProcess(await this.options.prepare(), output, {...this.options, label: 'spare'})
    if (!outcome.ok) {
      log.warn({error: outcome.error}, 'spare workerd did not start; a replaced shard starts its own process')
      return this.fillLater(RETRY_DELAY_MS)
    }
    const {process} = outcome.started
    if (this.stopped) return process.stop()
    this.ready = outcome.started
    this.options.onReady?.(true)
    void process.exited.then((exit) => {
      if (this.ready?.process !== process) return // taken, or stopped on purpose
      this.ready = null
      this.options.onReady?.(false)
      log.warn({...exit}, 'spare workerd exited; starting another')
      this.fillLater(REFILL_DELAY_MS)
    })
  }
}
