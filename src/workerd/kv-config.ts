// A Worker's KV namespaces in its workerd config: each `kv_namespace` binding becomes workerd's
// `kvNamespace` binding to the Worker's own KV service (./kv-worker.ts), the namespace id in the
// binding's props. The KV service keeps its Durable Objects in the Worker's Durable Object storage
// (<data dir>/do/<script>/, under the unique key below), which is why a Worker with KV namespaces
// counts as one with Durable Objects everywhere storage matters (process swaps, the code loader).
import type {Binding} from '../protocol/management-api.js'
import {capnpString} from './capnp.js'
import {KV_OBJECT_CLASS, type KvSizeLimits, kvWorkerSource} from './kv-worker.js'
import {renderStorageService} from './storage-service.js'

type KvBinding = Extract<Binding, {type: 'kv_namespace'}>

export function usesKvNamespaces(script: {bindings: Binding[]}): boolean {
  return script.bindings.some((binding) => binding.type === 'kv_namespace')
}

/** The storage directory name and object-id key of a Worker's KV namespaces: must never change. */
export function kvUniqueKey(script: string): string {
  // "-" never appears in a class name, so no Durable Object class of the Worker shares it.
  return `${script}:kv-namespaces`
}

export function kvServiceName(script: string): string {
  return `kv:${script}`
}

export function renderKvBinding(script: string, binding: KvBinding): string {
  const props = JSON.stringify({namespace: binding.namespaceId, binding: binding.name})
  return `(name = ${capnpString(binding.name)}, kvNamespace = (name = ${capnpString(kvServiceName(script))}, props = (json = ${capnpString(props)})))`
}

/** The Worker's KV service, if it has KV namespaces. `storage`: its Durable Object disk service, or "memory"; `sizes`: what it refuses past. */
export function renderKvServices(script: {name: string; bindings: Binding[]}, storage: string | 'memory' | null, sizes: KvSizeLimits): string[] {
  if (!usesKvNamespaces(script) || storage === null) return []
  return [
    renderStorageService(
      {
        name: kvServiceName(script.name),
        module: 'kv.js',
        source: kvWorkerSource(sizes),
        objectClass: KV_OBJECT_CLASS,
        uniqueKey: kvUniqueKey(script.name),
        bindings: [`(name = "NAMESPACES", durableObjectNamespace = "${KV_OBJECT_CLASS}")`],
      },
      storage,
    ),
  ]
}
