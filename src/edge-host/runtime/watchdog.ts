// Neighbour isolation: workerd enforces no CPU or memory limit, and one process runs every Worker of
// its shard on one thread, so one runaway Worker stalls or crashes all of them. The watchdog looks
// at every serving shard each `intervalMs`:
// - stall: its health socket has not answered a probe for `cpuLimitMs` (a Worker holds the thread —
//   an infinite loop, or a request over its CPU time);
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

/** The probe in flight on one shard: which process it asked, and since when. */
interface Probe {
  pid: number
  sentAt: number
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
    const probe = this.probes.get(shard.index)
    if (pid === null || (probe && probe.pid !== pid)) {
      this.probes.delete(shard.index) // not serving, or a new process: start over
      if (pid === null) return
    }
    const now = Date.now()
    const pending = this.probes.get(shard.index)
    if (pending && now - pending.sentAt > this.options.cpuLimitMs) {
      // Only a request inside for longer than the limit can be what holds the thread; without one
      // (a machine short of CPU) the process is left alone and probed afresh.
      const suspect = shard.suspect(this.options.cpuLimitMs)
      if (suspect !== null) return this.runaway(shard, 'stall', suspect, {stalledMs: now - pending.sentAt})
      this.probes.delete(shard.index)
      return
    }
    const rss = await residentBytes(pid)
    if (rss !== null && rss > this.options.memoryLimitBytes && shard.pid === pid) return this.runaway(shard, 'memory', shard.suspect(), {rssBytes: rss})
    if (rss !== null && this.options.recycleMemoryBytes !== null && rss > this.options.recycleMemoryBytes) shard.recycleIfStale()
    if (!pending) {
      const sent: Probe = {pid, sentAt: now}
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

/** VmRSS of a process in bytes, or null where /proc does not tell. */
async function residentBytes(pid: number): Promise<number | null> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '')
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  return kib === undefined ? null : Number(kib) * 1024
}
