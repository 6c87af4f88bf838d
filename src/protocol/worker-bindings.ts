// The bindings of a Worker as the kit describes them (what it finds in `env`), and their wire form
// (management-api Binding), which the host stores and the workerd config renders from.
import type {Binding} from './management-api.js'

/** What a Worker finds in `env`. */
export type WorkerBinding =
  | {type: 'text'; name: string; text: string}
  | {type: 'json'; name: string; json: unknown}
  | {type: 'durable_object'; name: string; className: string}
  /** A KV namespace the host keeps for this Worker alone. */
  | {type: 'kv_namespace'; name: string; namespaceId: string}
  /** A D1 database the host keeps for this Worker alone. */
  | {type: 'd1_database'; name: string; databaseId: string}
  /** An R2 bucket the host keeps for this Worker alone. */
  | {type: 'r2_bucket'; name: string; bucketName: string}
  /** `env.<name>.send()` / `sendBatch()` onto a queue of this Worker's own; `deliveryDelay` in seconds. */
  | {type: 'queue'; name: string; queue: string; deliveryDelay: number}
  /** `env.<name>.fetch()` reaches the current release of `scriptName`, wherever it runs. */
  | {type: 'service'; name: string; scriptName: string}
  /** `env.<name>.fetch(request)` answers from the Worker's own static assets. */
  | {type: 'assets'; name: string}

export function wireBindingOf(binding: WorkerBinding): Binding {
  switch (binding.type) {
    case 'text':
      return {type: 'plain_text', name: binding.name, text: binding.text}
    case 'json':
      return {type: 'json', name: binding.name, json: binding.json} as Binding
    case 'durable_object':
      return {type: 'durable_object_namespace', name: binding.name, className: binding.className}
    case 'service':
      return {type: 'service', name: binding.name, script: binding.scriptName}
    case 'assets':
      return {type: 'assets', name: binding.name}
    case 'kv_namespace':
      return {type: 'kv_namespace', name: binding.name, namespaceId: binding.namespaceId}
    case 'd1_database':
      return {type: 'd1_database', name: binding.name, databaseId: binding.databaseId}
    case 'r2_bucket':
      return {type: 'r2_bucket', name: binding.name, bucketName: binding.bucketName}
    case 'queue':
      return {type: 'queue', name: binding.name, queue: binding.queue, deliveryDelay: binding.deliveryDelay}
  }
}
