// A Worker's R2 buckets in its workerd config: each `r2_bucket` binding becomes workerd's `r2Bucket`
// binding to the Worker's own R2 service (./r2-worker.ts), the bucket name in the binding's props.
// The R2 service keeps its Durable Objects in the Worker's Durable Object storage
// (<data dir>/do/<script>/, under its unique key), which is why a Worker with R2 buckets
// counts as one with Durable Objects everywhere storage matters (process swaps, the code loader).
import type {Binding} from '../protocol/management-api.js'
import {capnpString} from './capnp.js'
import {R2_OBJECT_CLASS, R2_WORKER_SOURCE} from './r2-worker.js'
import type {StorageBindingKind} from './storage-service.js'

type R2Binding = Extract<Binding, {type: 'r2_bucket'}>

export const R2_STORAGE: StorageBindingKind = {
  bindingType: 'r2_bucket',
  metricsType: 'r2',
  serviceName: (script) => `r2:${script}`,
  uniqueKeySuffix: 'r2-buckets',
  module: 'r2.js',
  source: R2_WORKER_SOURCE,
  objectClass: R2_OBJECT_CLASS,
  namespacesBinding: 'BUCKETS',
}

export function renderR2Binding(script: string, binding: R2Binding): string {
  const props = JSON.stringify({bucket: binding.bucketName, binding: binding.name})
  return `(name = ${capnpString(binding.name)}, r2Bucket = (name = ${capnpString(R2_STORAGE.serviceName(script))}, props = (json = ${capnpString(props)})))`
}
