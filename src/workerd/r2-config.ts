// A Worker's R2 buckets in its workerd config: each `r2_bucket` binding becomes workerd's `r2Bucket`
// binding to the Worker's own R2 service (./r2-worker.ts), the bucket name in the binding's props.
// The R2 service keeps its Durable Objects in the Worker's Durable Object storage
// (<data dir>/do/<script>/, under the unique key below), which is why a Worker with R2 buckets
// counts as one with Durable Objects everywhere storage matters (process swaps, the code loader).
import type {Binding} from '../protocol/management-api.js'
import {capnpString} from './capnp.js'
import {R2_OBJECT_CLASS, R2_WORKER_SOURCE} from './r2-worker.js'
import {renderStorageService} from './storage-service.js'

type R2Binding = Extract<Binding, {type: 'r2_bucket'}>

export function usesR2Buckets(script: {bindings: Binding[]}): boolean {
  return script.bindings.some((binding) => binding.type === 'r2_bucket')
}

/** The storage directory name and object-id key of a Worker's R2 buckets: must never change. */
export function r2UniqueKey(script: string): string {
  // "-" never appears in a class name, so no Durable Object class of the Worker shares it.
  return `${script}:r2-buckets`
}

export function r2ServiceName(script: string): string {
  return `r2:${script}`
}

export function renderR2Binding(script: string, binding: R2Binding): string {
  const props = JSON.stringify({bucket: binding.bucketName, binding: binding.name})
  return `(name = ${capnpString(binding.name)}, r2Bucket = (name = ${capnpString(r2ServiceName(script))}, props = (json = ${capnpString(props)})))`
}

/** The Worker's R2 service, if it has R2 buckets. `storage`: its Durable Object disk service, or "memory". */
export function renderR2Services(script: {name: string; bindings: Binding[]}, storage: string | 'memory' | null): string[] {
  if (!usesR2Buckets(script) || storage === null) return []
  return [
    renderStorageService(
      {
        name: r2ServiceName(script.name),
        module: 'r2.js',
        source: R2_WORKER_SOURCE,
        objectClass: R2_OBJECT_CLASS,
        uniqueKey: r2UniqueKey(script.name),
        bindings: [`(name = "BUCKETS", durableObjectNamespace = "${R2_OBJECT_CLASS}")`],
      },
      storage,
    ),
  ]
}
