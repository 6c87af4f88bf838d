// The requests a live tail sees of a Worker on its own socket, under the loader (issue 35). Such a Worker runs behind the
// counting main module (../../workerd/worker-counts.ts): workerd makes no trace of it. While someone tails it, up to
// host.tail_max_events_per_second of its requests a second go to the shard's loader Worker instead, which runs the same
// release (a load of its own, made once per process and release) and traces every Worker it runs: the tail sees those,
// exactly the share the tail Worker forwarded when every request was traced, and the rest are counted as sampled out.
// So a tail costs the data plane a loader invocation and a trace for at most that many requests a second, and its
// arrival needs no new process. (A Worker with Durable Objects is always traced; its crons stay on its own socket.)
import {LOADER_SOCKET} from '../../workerd/loader-worker.js'
import type {LoadedScript, LoadIds} from './loaded-scripts.js'
import type {ScriptRoute, ShardOptions} from './shard-types.js'

export class TracedRequests {
  /** Service → its traced load in the running process, for the release of `fingerprint`. */
  private readonly loads = new Map<string, {fingerprint: string; loadId: string}>()
  private readonly windows = new Map<string, {second: number; sent: number}>()

  constructor(
    private readonly options: Pick<ShardOptions, 'tracedRequests' | 'tracesWanted' | 'loadScripts'>,
    /** The shard's load ids: a traced load is registered there, as the code listener finds it. */
    private readonly loadIds: LoadIds,
  ) {}

  /** The loader route this request of `service` takes (the loader traces it), or null: its own socket. */
  route(service: string, entry: LoadedScript): ScriptRoute | null {
    if (entry.traced || entry.usesDurableObjects || !this.options.tracesWanted(service)) return null
    const second = Math.floor(Date.now() / 1000)
    let window = this.windows.get(service)
    if (window?.second !== second) this.windows.set(service, (window = {second, sent: 0}))
    if (window.sent >= this.options.tracedRequests.perSecond) {
      this.options.tracedRequests.onSampled(service)
      return null
    }
    window.sent++
    let load = this.loads.get(service)
    if (load?.fingerprint !== entry.fingerprint) {
      const script = this.options.loadScripts().find((candidate) => candidate.name === service)
      if (!script) return null
      this.loads.set(service, (load = {fingerprint: entry.fingerprint, loadId: this.loadIds.register(script)}))
    }
    return {origin: `http://${LOADER_SOCKET}`, loadId: load.loadId}
  }

  /** A new process: the loads were the old one's. */
  clear(): void {
    this.loads.clear()
    this.windows.clear()
  }
}
