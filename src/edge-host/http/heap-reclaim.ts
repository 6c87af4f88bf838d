// Memory a flood of connections left behind, returned once the flood is over. Every connection
// the listeners accept or refuse costs a few KB of JavaScript objects (the socket, its stream
// state, listeners); thousands a second of them — an attacker reconnecting what the connection
// guard refused — outlive enough young-generation collections to be promoted, and the old
// generation grows by tens of MB. V8 collects it at its next major collection, which a host back
// at its usual load may not reach for a long time, so the RSS stayed up after the attack (issue
// 29: +22 to +62 MB, not returned 15 s later in 2 of 4 rounds). A coarse sweep watches the
// arrival rate; when a flood has come down to a tenth of its peak, one full collection returns
// the garbage (V8 then hands the emptied pages back to the system).
import v8 from 'node:v8'
import vm from 'node:vm'
import type {Logger} from 'pino'

/** How often the arrival rate is looked at. */
const SWEEP_MS = 5_000
/** Arrivals in one sweep that make a flood: 200 connections a second, far above a client's reconnects. */
const FLOOD_ARRIVALS = 1_000

type CollectGarbage = () => void

let collector: CollectGarbage | undefined
/** V8's full collection, exposed once for this process (`gc()` of a context created after the flag is set). */
function collectGarbage(): void {
  if (!collector) {
    v8.setFlagsFromString('--expose-gc')
    collector = vm.runInNewContext('gc') as CollectGarbage
  }
  collector()
}

export class HeapReclaim {
  private readonly timer: NodeJS.Timeout
  private arrivalsAtLastSweep = 0
  /** The most arrivals one sweep has seen since the last collection. */
  private peak = 0

  /** `arrivals`: connections the listeners have accepted or refused so far. */
  constructor(
    private readonly arrivals: () => number,
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => this.sweep(), SWEEP_MS).unref()
  }

  private sweep(): void {
    const total = this.arrivals()
    const recent = total - this.arrivalsAtLastSweep
    this.arrivalsAtLastSweep = total
    this.peak = Math.max(this.peak, recent)
    if (this.peak < FLOOD_ARRIVALS || recent > this.peak / 10) return
    const before = v8.getHeapStatistics().used_heap_size
    collectGarbage()
    const after = v8.getHeapStatistics().used_heap_size
    const MiB = 1024 * 1024
    this.log.info(
      {peakConnectionsPerSecond: Math.round(this.peak / (SWEEP_MS / 1000)), heapUsedMB: {before: Math.round(before / MiB), after: Math.round(after / MiB)}},
      'connection flood over; heap collected',
    )
    this.peak = 0
  }

  close(): void {
    clearInterval(this.timer)
  }
}
