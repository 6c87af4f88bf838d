// A Worker's D1 databases in its workerd config: each `d1_database` binding becomes a `wrapped`
// binding of workerd's own D1 client module around a service binding to the Worker's own D1 service
// (./d1-worker.ts), the database id in its props. The D1 service keeps its Durable Objects in the
// Worker's Durable Object storage (<data dir>/do/<script>/, under the unique key below), which is
// why a Worker with D1 databases counts as one with Durable Objects everywhere storage matters.
import type {Binding} from '../protocol/management-api.js'
import {capnpString} from './capnp.js'
import {D1_OBJECT_CLASS, D1_WORKER_SOURCE} from './d1-worker.js'
import {renderStorageService} from './storage-service.js'

type D1Binding = Extract<Binding, {type: 'd1_database'}>

/** workerd's implementation of Cloudflare's D1 binding API, which calls its `fetcher` over HTTP. */
const D1_CLIENT_MODULE = 'cloudflare-internal:d1-api'

export function usesD1Databases(script: {bindings: Binding[]}): boolean {
  return script.bindings.some((binding) => binding.type === 'd1_database')
}

/** The storage directory name and object-id key of a Worker's D1 databases: must never change. */
export function d1UniqueKey(script: string): string {
  // "-" never appears in a class name, so no Durable Object class of the Worker shares it.
  return `${script}:d1-databases`
}

/** The Worker's D1 service, and the socket the host reaches it on (`edgeworkers d1 execute`); never a script name. */
export function d1ServiceName(script: string): string {
  return `d1-${script}`
}

/** The D1 sockets of a shard running `scripts`. */
export function d1Sockets(scripts: Array<{name: string; bindings: Binding[]}>): string[] {
  return scripts.filter(usesD1Databases).map((script) => d1ServiceName(script.name))
}

export function renderD1Binding(script: string, binding: D1Binding): string {
  const props = JSON.stringify({database: binding.databaseId, binding: binding.name})
  const fetcher = `(name = "fetcher", service = (name = ${capnpString(d1ServiceName(script))}, props = (json = ${capnpString(props)})))`
  return `(name = ${capnpString(binding.name)}, wrapped = (moduleName = "${D1_CLIENT_MODULE}", innerBindings = [${fetcher}]))`
}

/** The Worker's D1 service, if it has D1 databases. `storage`: its Durable Object disk service, or "memory". */
export function renderD1Services(script: {name: string; bindings: Binding[]}, storage: string | 'memory' | null): string[] {
  if (!usesD1Databases(script) || storage === null) return []
  return [
    renderStorageService(
      {
        name: d1ServiceName(script.name),
        module: 'd1.js',
        source: D1_WORKER_SOURCE,
        objectClass: D1_OBJECT_CLASS,
        uniqueKey: d1UniqueKey(script.name),
        bindings: [`(name = "DATABASES", durableObjectNamespace = "${D1_OBJECT_CLASS}")`],
      },
      storage,
    ),
  ]
}
