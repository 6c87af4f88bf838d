// One workerd process: spawned on a config file with `--control-fd 3`, it is up once workerd has
// reported the port of every socket of the config; if it exits first, its stderr says why (a module
// that fails to compile makes the whole process exit).
//
// workerd dies with the host, whatever kills the host: on Linux it is started through util-linux
// `setpriv --pdeathsig KILL`, which sets the kernel's parent-death signal and then execs workerd
// (same pid, same fds) — a host killed with SIGKILL takes its children along. Every process is also
// recorded in the pid directory (pid + start time) until it exits, so a host start can kill the
// leftovers of a predecessor where no death signal exists (killRecordedLeftovers).
import {spawn, spawnSync, type ChildProcess} from 'node:child_process'
import {readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import path from 'node:path'
import {createInterface} from 'node:readline'
import {isSameLiveProcess, processStartTime} from './process-identity.js'

/** The workerd binary of the npm `workerd` package. */
export const WORKERD_BINARY: string = (createRequire(import.meta.url)('workerd') as {default: string}).default

/** How much of workerd's stderr a failed start reports. */
const STDERR_LIMIT = 16 * 1024
/**
 * Time a stopped process gets after SIGTERM before SIGKILL. The shard has already drained it (up to
 * the drain timeout) before it stops it, so this only covers workerd's own shutdown — and a Worker
 * spinning in a loop, which never lets it end.
 */
const STOP_GRACE_MS = 2_000

/** No bits for group or others. */
const PRIVATE_UMASK = 0o077

/** The parent-death-signal wrapper, where this system has one that works: a command prefix. */
export const DEATH_SIGNAL_WRAPPER: string[] = (() => {
  if (process.platform !== 'linux') return []
  const probe = spawnSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true'], {stdio: 'ignore'})
  return probe.status === 0 ? ['setpriv', '--pdeathsig', 'KILL', '--'] : []
})()

/**
 * Every workerd this process started and that still runs. If the host process dies without stopping
 * them (an uncaught exception), they die with it instead of holding Durable Object files; a host
 * killed outright is cleaned up by the next start (see killLeftoverProcesses).
 */
const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

export type StartOutcome = {ok: true; process: WorkerdProcess} | {ok: false; error: string}

export interface StartOptions {
  configPath: string
  /** Names of the config's sockets: the process is up once each reported its port. */
  sockets: string[]
  cwd: string
  /** workerd's own log lines (and the Workers' console output), one at a time, redacted. */
  onOutput?: (line: string, stream: 'stdout' | 'stderr') => void
  /** Applied to every output line before anything reads it (onOutput, a failed start's error). */
  redactOutput?: (line: string) => string
  startTimeoutMs: number
  /** Pass `--experimental` (host.experimental): lets Workers use flags and features workerd marks experimental. */
  experimental?: boolean
  /**
   * Where the host records the process while it runs, as `<pidLabel>.<pid>` (see
   * killRecordedLeftovers). The kit's build check runs without one: it outlives no host.
   */
  pidRecord?: {dir: string; label: string}
}

export class WorkerdProcess {
  /** Resolves with the exit code (or signal) whenever the process ends, expected or not. */
  readonly exited: Promise<{code: number | null; signal: NodeJS.Signals | null}>

  private constructor(
    private readonly child: ChildProcess,
    /** Socket name → the port it listens on. */
    readonly ports: ReadonlyMap<string, number>,
    exited: Promise<{code: number | null; signal: NodeJS.Signals | null}>,
  ) {
    this.exited = exited
  }

  get pid(): number {
    return this.child.pid!
  }

  static start(options: StartOptions): Promise<StartOutcome> {
    const [command, ...prefix] = [...DEATH_SIGNAL_WRAPPER, WORKERD_BINARY]
    const args = [...prefix, 'serve', options.configPath, '--control-fd', '3', ...(options.experimental ? ['--experimental'] : [])]
    // workerd creates its sockets and Durable Object files itself, with the umask it inherits: the
    // process starts under 077 so they are the host user's alone, whatever the host's own umask.
    // The fork inherits the mask at spawn, synchronously, so it is the host's again right after.
    const hostUmask = process.umask(PRIVATE_UMASK)
    let child: ChildProcess
    try {
      // Its own process group: a Ctrl-C (SIGINT to the terminal's foreground group) reaches the host
      // alone, which then stops its workerd itself — none exits under a host that still counts on it.
      child = spawn(command!, args, {cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe', 'pipe'], detached: true})
    } finally {
      process.umask(hostUmask)
    }
    running.add(child)
    const record = child.pid === undefined || !options.pidRecord ? null : path.join(options.pidRecord.dir, `${options.pidRecord.label}.${child.pid}`)
    // The start time read now is the wrapper's, and exec keeps it: the record names workerd.
    if (record) writeFileSync(record, processStartTime(child.pid!) ?? '', {mode: 0o600})
    let stderr = ''
    const exited = new Promise<{code: number | null; signal: NodeJS.Signals | null}>((resolve) => {
      child.once('exit', (code, signal) => {
        running.delete(child)
        if (record) rmSync(record, {force: true})
        resolve({code, signal})
      })
    })
    for (const stream of ['stdout', 'stderr'] as const) {
      createInterface({input: child[stream]!}).on('line', (raw) => {
        const line = options.redactOutput ? options.redactOutput(raw) : raw
        if (stream === 'stderr' && stderr.length < STDERR_LIMIT) stderr += `${line}\n`
        options.onOutput?.(line, stream)
      })
    }
    return new Promise<StartOutcome>((resolve) => {
      let settled = false
      const settle = (outcome: StartOutcome) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resolve(outcome)
      }
      const timer = setTimeout(() => {
        child.kill('SIGKILL')
        settle({ok: false, error: `workerd did not start listening within ${options.startTimeoutMs} ms`})
      }, options.startTimeoutMs)
      child.once('error', (error) => settle({ok: false, error: `workerd could not be started: ${error.message}`}))
      const ports = new Map<string, number>()
      createInterface({input: child.stdio[3] as NodeJS.ReadableStream}).on('line', (line) => {
        const message = parseControlMessage(line)
        if (message?.event !== 'listen' || typeof message.socket !== 'string' || typeof message.port !== 'number') return
        ports.set(message.socket, message.port)
        if (options.sockets.every((socket) => ports.has(socket))) settle({ok: true, process: new WorkerdProcess(child, ports, exited)})
      })
      // 'close' comes after the output streams ended, so stderr is complete by then.
      child.once('close', (code, signal) => {
        settle({ok: false, error: stderr.trim() || `workerd exited (${signal ?? `code ${code}`}) before listening`})
      })
    })
  }

  /** SIGTERM (workerd drains in-flight requests), then SIGKILL if it lingers. */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    this.child.kill('SIGTERM')
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs)
    await this.exited
    clearTimeout(timer)
  }

  /** SIGSTOP: the process keeps its sockets and memory but runs no more (a runaway awaiting its kill). */
  pause(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGSTOP')
  }

  /** For throwaway processes (validation, a runaway) that hold nothing worth draining. */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    this.child.kill('SIGKILL')
    await this.exited
  }
}

/**
 * Kills the workerd processes a previous host process recorded in `pidDir` and that still run (a
 * host killed outright where no death signal exists), and clears the records. A record whose pid
 * now names another process (start time differs) is dropped, never killed. Returns the pids killed.
 */
export async function killRecordedLeftovers(pidDir: string): Promise<number[]> {
  const killed: number[] = []
  for (const file of readdirSync(pidDir)) {
    const pid = Number(path.extname(file).slice(1))
    const startTime = readFileSync(path.join(pidDir, file), 'utf8')
    if (Number.isInteger(pid) && pid > 0 && isSameLiveProcess(pid, startTime)) {
      process.kill(pid, 'SIGKILL')
      killed.push(pid)
      while (processStartTime(pid) !== null) await new Promise((resolve) => setTimeout(resolve, 20))
    }
    rmSync(path.join(pidDir, file), {force: true})
  }
  return killed
}

function parseControlMessage(line: string): {event?: unknown; socket?: unknown; port?: unknown} | null {
  try {
    return JSON.parse(line) as {event?: unknown; socket?: unknown; port?: unknown}
  } catch {
    return null
  }
}
