// A Worker's queues in its workerd config: each `queue` binding becomes workerd's `queue` binding to
// the Worker's own queue service (./queue-worker.ts), the queue name and its producer's delivery
// delay in the binding's props. The queue service keeps its Durable Objects in the Worker's Durable
// Object storage (<data dir>/do/<script>/, under the unique key below), which is why a Worker with
// queues counts as one with Durable Objects everywhere storage matters (process swaps, the code
// loader). It delivers batches with `Fetcher.queue()` on a service binding to the Worker itself,
// which needs workerd's experimental `service_binding_extra_handlers` flag: a shard with a queue
// consumer runs workerd in experimental mode (as one with cron triggers does, ./cron-config.ts). A
// validation sandbox delivers nothing, so its queue service has neither that binding nor the flag.
import type {Binding, QueueConsumer} from '../protocol/management-api.js'
import {capnpString} from './capnp.js'
import {QUEUE_OBJECT_CLASS, QUEUE_WORKER_SOURCE} from './queue-worker.js'
import {renderStorageService} from './storage-service.js'

type QueueBinding = Extract<Binding, {type: 'queue'}>

export function usesQueues(script: {bindings: Binding[]; queueConsumers: QueueConsumer[]}): boolean {
  return script.queueConsumers.length > 0 || script.bindings.some((binding) => binding.type === 'queue')
}

export function usesQueueConsumers(script: {queueConsumers: QueueConsumer[]}): boolean {
  return script.queueConsumers.length > 0
}

/** The storage directory name and object-id key of a Worker's queues: must never change. */
export function queueUniqueKey(script: string): string {
  // "-" never appears in a class name, so no Durable Object class of the Worker shares it.
  return `${script}:queues`
}

/** The Worker's queue service, and the socket the host reads its queues' counts on; never a script name. */
export function queueServiceName(script: string): string {
  return `queues-${script}`
}

/** The queue sockets of a shard running `scripts`. */
export function queueSockets(scripts: Array<{name: string; bindings: Binding[]; queueConsumers: QueueConsumer[]}>): string[] {
  return scripts.filter(usesQueues).map((script) => queueServiceName(script.name))
}

export function renderQueueBinding(script: string, binding: QueueBinding): string {
  const props = JSON.stringify({queue: binding.queue, deliveryDelay: binding.deliveryDelay, binding: binding.name})
  return `(name = ${capnpString(binding.name)}, queue = (name = ${capnpString(queueServiceName(script))}, props = (json = ${capnpString(props)})))`
}

/**
 * The Worker's queue service, if it has queues. `storage`: its Durable Object disk service, or
 * "memory"; `deliver`: bind the Worker itself as the consumer (shards; not validation sandboxes).
 */
export function renderQueueServices(
  script: {name: string; bindings: Binding[]; queueConsumers: QueueConsumer[]},
  storage: string | 'memory' | null,
  deliver: boolean,
): string[] {
  if (!usesQueues(script) || storage === null) return []
  const settings = JSON.stringify({consumers: Object.fromEntries(script.queueConsumers.map((consumer) => [consumer.queue, consumer]))})
  const consumes = deliver && usesQueueConsumers(script)
  const bindings = [
    `(name = "QUEUES", durableObjectNamespace = "${QUEUE_OBJECT_CLASS}")`,
    `(name = "SETTINGS", json = ${capnpString(settings)})`,
    ...(consumes ? [`(name = "CONSUMER", service = ${capnpString(script.name)})`] : []),
  ]
  return [
    renderStorageService(
      {
        name: queueServiceName(script.name),
        module: 'queues.js',
        source: QUEUE_WORKER_SOURCE,
        objectClass: QUEUE_OBJECT_CLASS,
        uniqueKey: queueUniqueKey(script.name),
        bindings,
        compatibilityFlags: consumes ? ['service_binding_extra_handlers'] : [],
      },
      storage,
    ),
  ]
}
