// The HAProxy child of `host serve` (host.front = "haproxy"): started in the foreground (-db) through
// the same parent-death wrapper as workerd (../../workerd/process.ts), so it dies with the host
// however the host dies; restarted when it exits on its own. The first start inherits the public
// listening socket the host bound (fd 3, `bind fd@3`: port 0 works, no race); a restart binds the
// address that socket got.
import {type ChildProcess, spawn} from 'node:child_process'
import {writeFileSync} from 'node:fs'
import {createInterface} from 'node:readline'
import {setTimeout as sleep} from 'node:timers/promises'
import type {Logger} from 'pino'
import {DEATH_SIGNAL_WRAPPER} from '../../workerd/process.js'
import {RETRY_SERVER, SLOT_SERVER} from './haproxy-config.js'
import {runtimeCommands} from './runtime-api.js'

/** How long a start may take before it counts as failed. */
const START_TIMEOUT_MS = 10_000
/** Restart delays after unexpected exits, growing to the last. */
const RESTART_BACKOFF_MS = [50, 250, 1_000, 5_000]
/** A process that served this long resets the backoff. */
const STABLE_AFTER_MS = 60_000

/** Every haproxy this process started that still runs: killed if the host exits without stopping them. */
const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

export interface HaproxyProcessOptions {
  binary: string
  configPath: string
  adminSocket: string
  /** The configuration for a start: bound to `fd@3` first, to `HOST:PORT` on restarts. */
  render(bind: string): string
  /** Before a restart: the runtime state (maps, links) is rewritten to files the new process reads. */
  beforeRestart(): void
  /** A start that serves: the host pushes its tables again. */
  onServing(pid: number): void
  log: Logger
}

/**
 * What HAProxy says of the host's own moves — each proxy stopping with it (one per fast slot), a slot's server taken
 * out of service and back to drop its kept-alive connections (./front.ts) — at debug, not among the operator's logs.
 */
const ROUTINE = new RegExp(
  `: (Proxy w\\d+ stopped \\(cumulated conns|Server w\\d+/(${SLOT_SERVER}|${RETRY_SERVER}) is (going DOWN for maintenance|UP/READY \\(leaving forced maintenance\\))|backend 'w\\d+' has no server available!)`,
)

export class HaproxyProcess {
  private child: ChildProcess | null = null
  private stopping = false
  private restarts = 0
  private startedAt = 0

  constructor(
    private readonly options: HaproxyProcessOptions,
    /** `HOST:PORT` of the listener the first start inherited. */
    private readonly boundAddress: string,
  ) {}

  get pid(): number | null {
    return this.child?.pid ?? null
  }

  /** The first start, on the listening socket's descriptor; resolves once its runtime API answers. */
  async start(listenFd: number): Promise<void> {
    await this.spawn('fd@3', listenFd)
  }

  /** A soft stop (SIGUSR1: no new connections, requests inside end) for up to `graceMs`, then a hard one. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true
    const child = this.child
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGUSR1')
    const timer = setTimeout(() => child.kill('SIGTERM'), graceMs)
    await exited
    clearTimeout(timer)
  }

  private async spawn(bind: string, listenFd?: number): Promise<void> {
    writeFileSync(this.options.configPath, this.options.render(bind), {mode: 0o600})
    const [command, ...prefix] = [...DEATH_SIGNAL_WRAPPER, this.options.binary]
    const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'pipe', 'pipe']
    if (listenFd !== undefined) stdio.push(listenFd)
    const child = spawn(command!, [...prefix, '-db', '-f', this.options.configPath], {stdio, detached: true})
    this.child = child
    running.add(child)
    let output = ''
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({input: stream}).on('line', (line) => {
        if (output.length < 16_384) output += `${line}\n`
        this.options.log[ROUTINE.test(line) ? 'debug' : 'info']({component: 'front', haproxyPid: child.pid}, line)
      })
    }
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    child.once('exit', (code, signal) => {
      running.delete(child)
      if (this.stopping || this.child !== child) return
      this.options.log.error({haproxyPid: child.pid, code, signal}, 'haproxy exited; restarting it')
      if (Date.now() - this.startedAt > STABLE_AFTER_MS) this.restarts = 0
      const delay = RESTART_BACKOFF_MS[Math.min(this.restarts++, RESTART_BACKOFF_MS.length - 1)]!
      void sleep(delay).then(() => this.restart())
    })
    child.once('error', () => {}) // the exit above follows, or the start below times out
    const deadline = Date.now() + START_TIMEOUT_MS
    for (;;) {
      const answered = await runtimeCommands(this.options.adminSocket, ['show info']).then(
        (answer) => answer.includes('Pid:'),
        () => false,
      )
      if (answered) break
      if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
        this.child = null // the caller retries (or fails the host's start), not the exit handler
        child.kill('SIGKILL')
        await exited
        throw new Error(`haproxy did not start: ${output.trim() || 'no runtime API answer'}`)
      }
      await Promise.race([sleep(20), exited])
    }
    this.startedAt = Date.now()
    this.options.onServing(child.pid!)
  }

  private async restart(): Promise<void> {
    if (this.stopping) return
    try {
      this.options.beforeRestart()
      await this.spawn(this.boundAddress)
    } catch (error) {
      this.options.log.error({err: error}, 'haproxy restart failed; trying again')
      if (this.stopping) return
      await sleep(RESTART_BACKOFF_MS.at(-1)!)
      void this.restart()
    }
  }
}
