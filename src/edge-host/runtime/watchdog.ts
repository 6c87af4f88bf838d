// Neighbour isolation: workerd enforces no CPU or memory limit, and one process runs every Worker of
// its shard on one thread, so one runaway Worker stalls or crashes all of them. The watchdog looks
// at every serving shard each `intervalMs`:
// - stall: a Worker holds the thread (an infinite loop, or a request over its CPU time). Seen from
//   outside, a process whose thread is held answers nothing — not its health probe, not any
//   request — while it burns CPU. A process that is merely slow looks the same on the wall clock:
//   starved of CPU on a busy machine (or stopped), it burns little; busy with many short tasks (a
//   burst of first loads under the loader), it keeps answering some. So a stall is: the health probe
//   unanswered, no answer at all from the process, and at least `cpuLimitMs` of the process's CPU
//   time (/proc/<pid>/stat) burned, all over one window of at least `cpuLimitMs` — and a request
//   inside since before the window began, to blame. Any answer starts the window again. Without
//   /proc the CPU condition is not checked (wall clock only).
// - memory: the process's resident memory passed `memoryLimitBytes` (read from /proc; without
//   /proc this check does nothing, and only workerd's own heap limit — a crash — stops a bomb).
// Either kills the process and restarts the shard at once (Shard.restartNow, no backoff), and
// reports an incident against the script whose request was oldest inside the process. A process
// that dies on its own is reported by the shard itself (Shard onCrash). The host counts incidents
// per release and quarantines it after a few (HostState.recordIncident).
import {readFile} from 'node:fs/promises'
import type {Logger} from 'pino'
import type {Shard} from './shard.js'

export type IncidentKind = 'stall' | 'memory' | 'crash'

export interface WatchdogOptions {
  shards: readonly Shard[]
  intervalMs: number
  cpuLimitMs: number
  memoryLimitBytes: number
  /** Past this resident memory a shard holding replaced loads is recycled (no incident); null: never. */
  recycleMemoryBytes: number | null
  /** An incident on shard `index`; `script` is the suspect, null when no request was inside. */
  onIncident(index: number, kind: IncidentKind, script: string | null): void
  log: Logger
}

/** The probe in flight on one shard, and the stall window: which process, and how it stood when the window began. */
interface Probe {
  pid: number
  /** The probe was sent, or the process last answered something: whichever came later. */
  since: number
  /** The process's CPU time then, ms; null without /proc. */
  cpuMs: number | null
  /** Shard.answered then. */
  answered: number
}

export class Watchdog {
  private timer: NodeJS.Timeout | null = null
  private readonly probes = new Map<number, Probe>()
  private ticking = false

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
    try {
      await Promise.all(this.options.shards.map((shard) => this.check(shard)))
    } finally {
      this.ticking = false
    }
  }

  private async check(shard: Shard): Promise<void> {
    const pid = shard.pid
    if (pid === null || this.probes.get(shard.index)?.pid !== pid) this.probes.delete(shard.index) // not serving, or a new process: start over
    if (pid === null) return
    const [cpuMs, rss] = await Promise.all([cpuTimeMs(pid), residentBytes(pid)])
    if (shard.pid !== pid) return
    if (rss !== null && rss > this.options.memoryLimitBytes) return this.runaway(shard, 'memory', shard.suspect(), {rssBytes: rss})
    if (rss !== null && this.options.recycleMemoryBytes !== null && rss > this.options.recycleMemoryBytes) shard.recycleIfStale()
    const now = Date.now()
    const pending = this.probes.get(shard.index)
    if (pending && shard.answered !== pending.answered) Object.assign(pending, {since: now, cpuMs, answered: shard.answered})
    if (pending && now - pending.since > this.options.cpuLimitMs) {
      const burnedMs = cpuMs === null || pending.cpuMs === null ? null : cpuMs - pending.cpuMs
      // Starved or stopped (little CPU burned): keep watching the same window.
      if (burnedMs !== null && burnedMs < this.options.cpuLimitMs) return
      // Only a request inside since before the window can be what holds the thread; without one the
      // process is left alone and probed afresh.
      const suspect = shard.suspect(now - pending.since)
      if (suspect !== null) return this.runaway(shard, 'stall', suspect, {stalledMs: now - pending.since, ...(burnedMs === null ? {} : {cpuMs: burnedMs})})
      this.probes.delete(shard.index)
      return
    }
    if (!pending) {
      const sent: Probe = {pid, since: now, cpuMs, answered: shard.answered}
      this.probes.set(shard.index, sent)
      void shard.probe().then((answered) => {
        // Only an answer clears the probe: a failed one (the process went away) is cleared above.
        if (answered && this.probes.get(shard.index) === sent) this.probes.delete(shard.index)
      })
    }
  }

  private runaway(shard: Shard, kind: IncidentKind, suspect: string | null, detail: Record<string, number>): void {
    this.probes.delete(shard.index)
    this.options.log.warn({shard: shard.index, kind, suspect, ...detail}, 'runaway shard; restarting it now')
    this.options.onIncident(shard.index, kind, suspect)
    void shard.restartNow()
  }
}

/** Clock ticks per second of /proc/<pid>/stat: USER_HZ, 100 on every Linux ABI Node runs on. */
const USER_HZ = 100

/** User plus system CPU time of a process (all its threads) in ms, or null where /proc does not tell. */
async function cpuTimeMs(pid: number): Promise<number | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')
  // Fields after the command name (which may hold spaces), from field 3 (state): utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12])
  return Number.isFinite(ticks) ? (ticks * 1000) / USER_HZ : null
}

/** VmRSS of a process in bytes, or null where /proc does not tell. */
async function residentBytes(pid: number): Promise<number | null> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '')
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  return kib === undefined ? null : Number(kib) * 1024
}
