// The per-Worker counts of the Workers whose traces nobody reads (../workerd/worker-counts.ts): read
// from each serving shard's worker-counts socket when /metrics is scraped, when `status` asks for
// the activity, and from a process about to be stopped, and counted as the tail Worker's summaries
// are (./tail-hub.ts). Each read takes what the Workers counted since the last one, so reads add up;
// reads that overlap share one (a scrape collects several counters at once).
import type {Agent} from 'undici'
import {WORKER_COUNTS_SOCKET} from '../workerd/worker-counts.js'
import {readShardCounters} from './shard-counters.js'
import type {TailHub} from './tail-hub.js'

export class WorkerCounts {
  private reading: Promise<void> | null = null

  constructor(private readonly hub: TailHub) {}

  /** Reads every serving process (`agents`, one per shard; null: the shard does not serve now). */
  readAll(agents: Array<Agent | null>): Promise<void> {
    this.reading ??= Promise.all(agents.map((agent) => (agent ? this.read(agent) : undefined))).then(() => {
      this.reading = null
    })
    return this.reading
  }

  /** Counts what the Workers of the process behind `agent` counted since the last read; nothing when it has none or does not answer. */
  async read(agent: Agent): Promise<void> {
    const summaries = await readShardCounters(agent, WORKER_COUNTS_SOCKET)
    // null: no such socket (every Worker traced), or the process is going: nothing to count
    if (summaries === null) return
    this.hub.publish({summaries})
  }
}
