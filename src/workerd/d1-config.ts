// A Worker's D1 databases in its workerd config: each `d1_database` binding becomes a `wrapped`
// binding of workerd's own D1 client module around a service binding to the Worker's own D1 service
// (./d1-worker.ts), the database id in its props. The D1 service keeps its Durable Objects in the
// Worker's Durable Object storage (<data dir>/do/<script>/, under its unique key), which is
// why a Worker with D1 databases counts as one with Durable Objects everywhere storage matters.
import type {Binding} from '../protocol/management-api.js'
import {capnpString} from './capnp.js'
import {D1_OBJECT_CLASS, D1_WORKER_SOURCE} from './d1-worker.js'
import {type StorageBindingKind, usesStorageKind} from './storage-service.js'

type D1Binding = Extract<Binding, {type: 'd1_database'}>

/** workerd's implementation of Cloudflare's D1 binding API, which calls its `fetcher` over HTTP. */
const D1_CLIENT_MODULE = 'cloudflare-internal:d1-api'

export const D1_STORAGE: StorageBindingKind = {
  bindingType: 'd1_database',
  metricsType: 'd1',
  /** Also the socket the host reaches it on (`edgeworkers d1 execute`); never a script name. */
  serviceName: (script) => `d1-${script}`,
  uniqueKeySuffix: 'd1-databases',
  module: 'd1.js',
  source: D1_WORKER_SOURCE,
  objectClass: D1_OBJECT_CLASS,
  namespacesBinding: 'DATABASES',
}

/** The D1 sockets of a shard running `scripts`. */
export function d1Sockets(scripts: Array<{name: string; bindings: Binding[]}>): string[] {
  return scripts.filter((script) => usesStorageKind(D1_STORAGE, script)).map((script) => D1_STORAGE.serviceName(script.name))
}

export function renderD1Binding(script: string, binding: D1Binding): string {
  const props = JSON.stringify({database: binding.databaseId, binding: binding.name})
  const fetcher = `(name = "fetcher", service = (name = ${capnpString(D1_STORAGE.serviceName(script))}, props = (json = ${capnpString(props)})))`
  return `(name = ${capnpString(binding.name)}, wrapped = (moduleName = "${D1_CLIENT_MODULE}", innerBindings = [${fetcher}]))`
}
