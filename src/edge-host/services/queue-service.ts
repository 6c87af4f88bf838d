// A script's queues as operators read them (`edgeworkers queues list|show`): every queue the script
// produces, consumes or dead-letters into, with its consumer's settings from the script's release and
// its counts read now from the queue's own store, through the script's queue service on that
// service's socket (../../workerd/queue-config.ts) in the shard that runs the script.
import type {QueueList, QueueStatus, ValidUploadScript} from '../../protocol/management-api.js'
import {queueServiceName} from '../../workerd/queue-config.js'
import type {WorkerdRuntime} from '../runtime/runtime.js'
import type {HostState, ScriptRecord} from '../state/host-state.js'
import {requireLiveScript, withScriptShard} from './common.js'

type Binding = ValidUploadScript['bindings'][number]
type Counts = Omit<QueueStatus, 'queue' | 'producers' | 'consumer'>

export class QueueService {
  constructor(
    private readonly state: HostState,
    private readonly runtime: WorkerdRuntime,
    private readonly holdTimeoutMs: number,
  ) {}

  async list(scriptName: string): Promise<QueueList> {
    const script = requireLiveScript(this.state, scriptName, 'queues')
    const producers = script.bindings.filter((binding): binding is Extract<Binding, {type: 'queue'}> => binding.type === 'queue')
    const names = [
      ...new Set([
        ...producers.map((binding) => binding.queue),
        ...script.queueConsumers.flatMap((consumer) => [consumer.queue, ...(consumer.deadLetterQueue ? [consumer.deadLetterQueue] : [])]),
      ]),
    ].sort()
    if (names.length === 0) return {queues: []}
    const counts = await this.counts(script, names)
    return {
      queues: names.map((queue, index) => ({
        queue,
        producers: producers.filter((binding) => binding.queue === queue).map((binding) => binding.name),
        consumer: script.queueConsumers.find((consumer) => consumer.queue === queue) ?? null,
        ...counts[index]!,
      })),
    }
  }

  private counts(script: ScriptRecord, queues: string[]): Promise<Counts[]> {
    return withScriptShard(this.runtime, this.holdTimeoutMs, script, async (dispatcher) => {
      const response = await dispatcher.request({
        origin: `http://${queueServiceName(script.name)}`,
        path: '/status',
        method: 'POST',
        headers: {'content-type': 'application/json'},
        body: JSON.stringify({queues}),
      })
      if (response.statusCode !== 200) throw new Error(`the queue service answered ${response.statusCode}: ${await response.body.text()}`)
      return (await response.body.json()) as Counts[]
    })
  }
}
