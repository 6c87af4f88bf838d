// One workerd process: spawned on a config file with `--control-fd 3`, it is up once workerd has
// reported the port of every socket of the config; if it exits first, its stderr says why (a module
// that fails to compile makes the whole process exit).
import {spawn, type ChildProcess} from 'node:child_process'
import {createRequire} from 'node:module'
import {createInterface} from 'node:readline'

/** The workerd binary of the npm `workerd` package. */
export const WORKERD_BINARY: string = (createRequire(import.meta.url)('workerd') as {default: string}).default

/** How much of workerd's stderr a failed start reports. */
const STDERR_LIMIT = 16 * 1024
/** Time a stopped process gets to drain before it is killed. */
const STOP_GRACE_MS = 10_000

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
  /** workerd's own log lines (and the Workers' console output), one at a time. */
  onOutput?: (line: string, stream: 'stdout' | 'stderr') => void
  startTimeoutMs: number
  /** Pass `--experimental` (host.experimental): lets Workers use flags and features workerd marks experimental. */
  experimental?: boolean
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
    const args = ['serve', options.configPath, '--control-fd', '3', ...(options.experimental ? ['--experimental'] : [])]
    const child = spawn(WORKERD_BINARY, args, {
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    })
    running.add(child)
    let stderr = ''
    const exited = new Promise<{code: number | null; signal: NodeJS.Signals | null}>((resolve) => {
      child.once('exit', (code, signal) => {
        running.delete(child)
        resolve({code, signal})
      })
    })
    for (const stream of ['stdout', 'stderr'] as const) {
      createInterface({input: child[stream]!}).on('line', (line) => {
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

  /** For throwaway processes (validation) that hold nothing worth draining. */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    this.child.kill('SIGKILL')
    await this.exited
  }
}

function parseControlMessage(line: string): {event?: unknown; socket?: unknown; port?: unknown} | null {
  try {
    return JSON.parse(line) as {event?: unknown; socket?: unknown; port?: unknown}
  } catch {
    return null
  }
}
