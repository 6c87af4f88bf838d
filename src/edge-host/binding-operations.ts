// The binding operations of the host's Workers, as the per-Worker metric counts them: read from each
// serving shard's binding-metrics socket (../workerd/binding-metrics.ts) when /metrics is scraped,
// and from a process about to be stopped. Each read takes what the binding services counted since
// the last one, so reads add up; a process that crashes loses what it counted since the last read.
import type {Agent} from 'undici'
import {BINDING_METRICS_SOCKET, type ShardBindingCounts} from '../workerd/binding-metrics.js'
import type {HostMetrics} from './metrics.js'
import {readShardCounters} from './shard-counters.js'

const OUTCOMES = ['ok', 'error'] as const

type Labels = Parameters<HostMetrics['bindingOperations']['inc']>[0]

export class BindingOperations {
  /** Script → the label sets counted for it, removed when it is retired. */
  private readonly series = new Map<string, Map<string, Labels>>()

  constructor(private readonly metrics: HostMetrics) {}

  /** Reads every serving process (`agents`, one per shard; null: the shard does not serve now). */
  async readAll(agents: Array<Agent | null>): Promise<void> {
    await Promise.all(agents.map((agent) => (agent ? this.read(agent) : undefined)))
  }

  /** Counts what the process behind `agent` counted since the last read; nothing when it has no binding services or does not answer. */
  async read(agent: Agent): Promise<void> {
    // null: no such socket (no binding services), or the process is going: nothing to count
    const answer = ((await readShardCounters(agent, BINDING_METRICS_SOCKET)) ?? []) as ShardBindingCounts
    for (const {script, type, counts} of answer) {
      for (const [binding, operations] of Object.entries(counts)) {
        for (const [operation, tallies] of Object.entries(operations)) {
          OUTCOMES.forEach((outcome, index) => {
            if (tallies[index]! > 0) this.count({script, type, binding, operation, outcome}, tallies[index]!)
          })
        }
      }
    }
  }

  /** Drops a retired script's series. */
  forget(script: string): void {
    for (const labels of this.series.get(script)?.values() ?? []) this.metrics.bindingOperations.remove(labels)
    this.series.delete(script)
  }

  private count(labels: Labels & {script: string}, value: number): void {
    let known = this.series.get(labels.script)
    if (!known) this.series.set(labels.script, (known = new Map()))
    known.set(JSON.stringify(labels), labels)
    this.metrics.bindingOperations.inc(labels, value)
  }
}
