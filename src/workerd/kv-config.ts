// A Worker's KV namespaces in its workerd config: each `kv_namespace` binding becomes workerd's
// `kvNamespace` binding to the Worker's own KV service (./kv-worker.ts), the namespace id in the
// binding's props. The KV service keeps its Durable Objects in the Worker's Durable Object storage
// (<data dir>/do/<script>/, under its unique key), which is why a Worker with KV namespaces
// counts as one with Durable Objects everywhere storage matters (process swaps, the code loader).
import type {Binding} from '../protocol/management-api.js'
import {capnpString} from './capnp.js'
import {KV_OBJECT_CLASS, KV_WORKER_SOURCE} from './kv-worker.js'
import type {StorageBindingKind} from './storage-service.js'

type KvBinding = Extract<Binding, {type: 'kv_namespace'}>

export const KV_STORAGE: StorageBindingKind = {
  bindingType: 'kv_namespace',
  metricsType: 'kv',
  serviceName: (script) => `kv:${script}`,
  uniqueKeySuffix: 'kv-namespaces',
  module: 'kv.js',
  source: KV_WORKER_SOURCE,
  objectClass: KV_OBJECT_CLASS,
  namespacesBinding: 'NAMESPACES',
}

export function renderKvBinding(script: string, binding: KvBinding): string {
  const props = JSON.stringify({namespace: binding.namespaceId, binding: binding.name})
  return `(name = ${capnpString(binding.name)}, kvNamespace = (name = ${capnpString(KV_STORAGE.serviceName(script))}, props = (json = ${capnpString(props)})))`
}
