// Neighbour isolation: workerd enforces no CPU or memory limit, and one process runs every Worker of
// its shard on one thread, so one runaway Worker stalls or crashes all of them. The watchdog looks
// at every serving shard each `intervalMs`:
// - stall: a Worker holds the thread (an infinite loop, or a request over its CPU time). Seen from
//   outside, a process whose thread is held answers nothing — not its health probe, not any
//   request — while its thread runs on the CPU. A process that is merely slow looks the same on the
//   wall clock: stopped, it runs not at all; busy with many short tasks, it keeps answering some.
//   But the thread of an innocent process is also held legitimately for a while (a garbage
//   collection, a compile), and on a busy machine that while is stretched: at load 10–41 on 2 cores
//   such holds of 100–150 ms of CPU took ~600–740 ms of wall clock without an answer, and were
//   judged stalls. A spinning thread at load ~18 got 100–280 ms of CPU in 600 ms. So a stall is:
//   the health probe unanswered and no answer at all from the process over one window of at
//   least `cpuLimitMs`; its main thread (the one every Worker runs on, /proc/<pid>/task/<pid>/stat)
//   on the CPU for HELD_CPU_SHARE of the limit in that window (more than any legitimate hold; a
//   spinning thread gets there at the limit on a machine with CPU to spare, later on one without);
//   and a request inside since before the window began, to blame. Any answer starts the window
//   again, and the host's own pauses (however much later than its interval a tick runs, or all of
//   the time since the last tick when the host was busy nearly all of it) do not count: the host
//   could not read answers then. Without /proc the CPU condition is not checked.
//   Every Worker of the shard waits while its thread is held, so the limit is short (500 ms).
// - memory: the process's resident memory passed `memoryLimitBytes`, or grew by HELD_GROWTH_BYTES
//   over a window in which it answered nothing with a request inside since before it (a Worker
//   allocating without bound holds the thread too; this catches it before the stall rule, whose
//   CPU share such a thread, busy with page faults on a loaded machine, reaches late). Read from
//   /proc; without it this check does nothing, and only workerd's own heap limit — a crash — stops a bomb.
// Either replaces the process at once (Shard.restartNow: the replacement starts first, no backoff)
// and reports an incident against the script whose request was oldest inside the process; the host
// then moves that script to a shard of its own before the replacement reads its scripts. A process
// that dies on its own is reported by the shard itself (Shard onCrash). The host counts incidents
// per release and quarantines it after a few (HostState.recordIncident).
import {readFileSync} from 'node:fs'
import type {Logger} from 'pino'
import type {Shard} from './shard.js'

export type IncidentKind = 'stall' | 'memory' | 'crash'

export interface WatchdogOptions {
  /** The shards to watch, read at every tick (a Worker's own shard may be added at any time). */
  shards(): readonly Shard[]
  intervalMs: number
  cpuLimitMs: number
  memoryLimitBytes: number
  /** Past this resident memory a shard holding replaced loads is recycled (no incident); null: never. */
  recycleMemoryBytes: number | null
  /** An incident on shard `index`; `script` is the suspect, null when no request was inside. */
  onIncident(index: number, kind: IncidentKind, script: string | null): void
  /** Requests that reach a shard past the host's data plane (the front door's fast path): the script of the oldest inside, if any. */
  suspectOutsideHost?(shard: Shard): Promise<string | null>
  log: Logger
}

/** The probe in flight on one shard, and the stall window: which process, and how it stood when the window began. */
interface Probe {
  pid: number
  /** The probe was sent, or the process last answered something: whichever came later. */
  since: number
  /** The CPU time of its main thread then, ms; null without /proc. */
  cpuMs: number | null
  /** Its resident memory then; null without /proc. */
  rssBytes: number | null
  /** Shard.answered then. */
  answered: number
}

/** Event-loop use since the last tick past which the host counts as paused for all of that time. */
const HOST_SATURATED = 0.9

export class Watchdog {
  private timer: NodeJS.Timeout | null = null
  private readonly probes = new Map<number, Probe>()
  private ticking = false
  /** When the last tick ran: a tick much later than its interval means the host itself was not running. */
  private lastTickAt = 0
  /** The host's event-loop use at the last tick. */
  private lastLoopUse = performance.eventLoopUtilization()

  constructor(private readonly options: WatchdogOptions) {}

  start(): void {
    this.timer ??= setInterval(() => void this.tick(), this.options.intervalMs)
    this.timer.unref()
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }

  private async tick(): Promise<void> {
    if (this.ticking) return
    this.ticking = true
    const now = Date.now()
    // The host's own pause (a loaded machine, a long GC, a flood of connections to accept) is not the
    // process's: while the host did not run it could not read the answers, so that time does not
    // count toward any stall window — every bit of it, not only long pauses: many short ones (an
    // attacker's reconnect waves) add up to a false stall of an innocent Worker.
    // Bursts back to back, each shorter than the interval, delay no tick by much, yet leave answers
    // unread just the same: a host busy nearly all the time since the last tick was paused all of it.
    const loopUse = performance.eventLoopUtilization(this.lastLoopUse)
    this.lastLoopUse = performance.eventLoopUtilization()
    const sinceLastTick = now - this.lastTickAt
    const paused = this.lastTickAt === 0 ? 0 : loopUse.utilization >= HOST_SATURATED ? sinceLastTick : sinceLastTick - this.options.intervalMs
    this.lastTickAt = now
    if (paused > 0) for (const probe of this.probes.values()) probe.since += paused
    try {
      await Promise.all(this.options.shards().map((shard) => this.check(shard, now)))
    } finally {
      this.ticking = false
    }
  }

  /**
   * `now`: when the tick ran. The window is judged up to then, not up to when /proc was read: the
   * host may have been held between the two (a flood of connections accepted in one go) without a
   * later tick yet to discount it.
   */
  private async check(shard: Shard, now: number): Promise<void> {
    const pid = shard.pid
    if (pid === null || this.probes.get(shard.index)?.pid !== pid) this.probes.delete(shard.index) // not serving, or a new process: start over
    if (pid === null) return
    const [cpuMs, rss] = [mainThreadCpuMs(pid), residentBytes(pid)]
    const pending = this.probes.get(shard.index)
    // A request inside since before the process last answered holds its thread: that one, if any.
    if (rss !== null && rss > this.options.memoryLimitBytes) {
      const suspect = shard.suspect(now - (pending?.since ?? now)) ?? shard.suspect() ?? (await this.options.suspectOutsideHost?.(shard)) ?? null
      return shard.pid === pid ? this.runaway(shard, 'memory', suspect, {rssBytes: rss}) : undefined
    }
    if (rss !== null && this.options.recycleMemoryBytes !== null && rss > this.options.recycleMemoryBytes) shard.recycleIfStale()
    if (pending && shard.answered !== pending.answered) Object.assign(pending, {since: now, cpuMs, rssBytes: rss, answered: shard.answered})
    // Grown by more than any Worker may hold while answering nothing: a Worker allocating without
    // bound holds the thread, caught long before the process reaches its limit (or the stall rule
    // its CPU share: the thread spends its time in page faults, on a busy machine a fraction of it).
    const grownBytes = rss === null || pending?.rssBytes == null ? 0 : rss - pending.rssBytes
    if (pending && grownBytes >= HELD_GROWTH_BYTES && !shard.compiling) return this.ifHeld(shard, pending, now, 'memory', {grownBytes})
    if (pending && now - pending.since >= this.options.cpuLimitMs) {
      const burnedMs = cpuMs === null || pending.cpuMs === null ? null : cpuMs - pending.cpuMs
      // Stopped, starved, or held no longer than a legitimate hold: keep watching the same window.
      // A burst of first loads compiling holds the thread legitimately for longer: while one is on
      // its way, the whole limit.
      if (burnedMs !== null && burnedMs < this.options.cpuLimitMs * (shard.compiling ? 1 : HELD_CPU_SHARE)) return
      return this.ifHeld(shard, pending, now, 'stall', {stalledMs: now - pending.since, ...(burnedMs === null ? {} : {cpuMs: burnedMs})})
    }
    if (!pending) {
      const sent: Probe = {pid, since: now, cpuMs, rssBytes: rss, answered: shard.answered}
      this.probes.set(shard.index, sent)
      void shard.probe().then((answered) => {
        // Only an answer clears the probe: a failed one (the process went away) is cleared above.
        if (answered && this.probes.get(shard.index) === sent) this.probes.delete(shard.index)
      })
    }
  }

  /**
   * The process answered nothing over `pending`'s window and looks held (`kind`): replaced if a
   * request inside since before the window is there to blame (only such a request can be what holds
   * the thread); without one the process is left alone and probed afresh.
   */
  private async ifHeld(shard: Shard, pending: Probe, now: number, kind: IncidentKind, detail: Record<string, number>): Promise<void> {
    // An answer the host has received but not yet read (timers run before I/O callbacks) is one.
    await new Promise((resolve) => setImmediate(resolve))
    if (shard.pid !== pending.pid || shard.answered !== pending.answered) return
    const suspect = shard.suspect(now - pending.since) ?? (await this.options.suspectOutsideHost?.(shard)) ?? null
    if (suspect !== null && shard.pid === pending.pid && shard.answered === pending.answered) return this.runaway(shard, kind, suspect, detail)
    this.probes.delete(shard.index)
  }

  private runaway(shard: Shard, kind: IncidentKind, suspect: string | null, detail: Record<string, number>): void {
    this.probes.delete(shard.index)
    this.options.log.warn({shard: shard.index, kind, suspect, ...detail}, 'runaway shard; restarting it now')
    this.options.onIncident(shard.index, kind, suspect)
    void shard.restartNow(suspect)
  }
}

/**
 * The CPU a held thread must have run in one window without answering, as a share of the limit:
 * 200 ms of the default 500, above the longest legitimate hold measured (150 ms).
 */
const HELD_CPU_SHARE = 0.4

/**
 * What a process may grow by over a window in which it answered nothing: twice the memory one
 * Worker may use on Cloudflare (128 MB). No legitimate hold (a GC, a compile) grows it so; a Worker
 * allocating without bound does in a fraction of the stall window (~0.2 s of its CPU).
 */
const HELD_GROWTH_BYTES = 256 * 1024 * 1024

/** Clock ticks per second of /proc/<pid>/stat: USER_HZ, 100 on every Linux ABI Node runs on. */
const USER_HZ = 100

/**
 * User plus system CPU time of a process's main thread in ms, or null where /proc does not tell:
 * the thread a held Worker holds, not V8's helper threads, which work for any process.
 */
function mainThreadCpuMs(pid: number): number | null {
  const stat = procFile(`/proc/${pid}/task/${pid}/stat`)
  // Fields after the command name (which may hold spaces), from field 3 (state): utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12])
  return Number.isFinite(ticks) ? (ticks * 1000) / USER_HZ : null
}

/** VmRSS of a process in bytes, or null where /proc does not tell. */
function residentBytes(pid: number): number | null {
  const status = procFile(`/proc/${pid}/status`)
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  return kib === undefined ? null : Number(kib) * 1024
}

/**
 * A /proc file's text, '' once the process is gone. Read synchronously: procfs answers from memory,
 * and fs/promises' open, stat, read and close through the thread pool cost ~7× the CPU (a tick's two
 * files: ~200 µs against ~25 µs, about 2 ms of the host's CPU per second per shard; BENCHMARKS.md).
 */
function procFile(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}
