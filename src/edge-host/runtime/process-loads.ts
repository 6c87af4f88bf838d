// The Worker Loader loads of one shard process (host.code_loading = "loader"): which load ids it
// holds, and the ones on their way into it. workerd compiles a loaded Worker on its one thread; a
// burst of first requests (every Worker's first one after a start) would queue all their loads
// there at once, and the process would answer nothing — neighbours, health probe — until the whole
// burst had compiled (~0.4 s for 20 small Workers here, seconds for hundreds): to the watchdog, a
// Worker holding the thread. So the host loads each id once, by a warm-up request, at most
// LOADS_IN_FLIGHT at a time per process, and a Worker's requests wait for its load.
import type {Agent} from 'undici'
import {warmLoad} from './shard-connections.js'

/** Two: one compiling while the next fetches its code. */
const LOADS_IN_FLIGHT = 2

export class ProcessLoads {
  private readonly loaded = new Set<string>()
  private readonly loading = new Map<string, Promise<void>>()
  private running = 0
  private readonly queue: Array<() => void> = []

  constructor(
    private readonly agent: Agent,
    private readonly timeoutMs: number,
    /** The process answered a load: it is making progress (the watchdog's sign, see ProcessRequests). */
    private readonly onAnswer: () => void,
  ) {}

  /** A load is on its way into the process: it may be compiling, which holds its thread too. */
  get busy(): boolean {
    return this.loading.size > 0
  }

  /**
   * Undefined when the process holds `loadId`; else settles once it does — or once loading it
   * failed, and the request meets the failure itself (a Worker that throws at its top level).
   */
  pending(loadId: string): Promise<void> | undefined {
    if (this.loaded.has(loadId)) return undefined
    return this.load(loadId).catch(() => {})
  }

  /** Loads `loadId` into the process (once, however many ask); rejects when the loader could not. */
  load(loadId: string): Promise<void> {
    if (this.loaded.has(loadId)) return Promise.resolve()
    let loading = this.loading.get(loadId)
    if (!loading) {
      loading = this.inSlot(() => warmLoad(this.agent, loadId, this.timeoutMs))
        .then(() => {
          this.onAnswer()
          this.loaded.add(loadId)
        })
        .finally(() => this.loading.delete(loadId))
      this.loading.set(loadId, loading)
    }
    return loading
  }

  private async inSlot(task: () => Promise<void>): Promise<void> {
    if (this.running >= LOADS_IN_FLIGHT) await new Promise<void>((resolve) => this.queue.push(resolve))
    this.running++
    try {
      await task()
    } finally {
      this.running--
      this.queue.shift()?.()
    }
  }
}
