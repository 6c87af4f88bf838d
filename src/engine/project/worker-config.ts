// What the edge host is told to run for a verified version: the bundle's modules with the types the
// manifest gives them, the manifest's compatibility flags, and the Worker's env. One place, so the
// build-time check (./check.ts) and the deploy task upload the same Worker.
import {type QueueConsumer, queueConsumerOf} from '../../protocol/management-api.js'
import type {WorkerBinding} from '../../protocol/worker-bindings.js'
import type {ScriptModule} from '../../provider/types.js'
import type {BundleModule} from './bundle.js'
import {d1DatabaseIdOf, moduleEntriesOf, STATIC_DATA_BINDING, type WorkerManifest} from './manifest.js'

/** The bundle's modules (tuple order) with their types. */
export function scriptModulesOf(manifest: WorkerManifest, modules: readonly BundleModule[]): ScriptModule[] {
  const types = new Map(moduleEntriesOf(manifest).map((entry) => [entry.name, entry.type]))
  return modules.map((module) => ({name: module.name, type: types.get(module.name) ?? 'esModule', content: module.content}))
}

/**
 * The Worker's env: vars (a string is a text binding, any other JSON value a JSON binding), the
 * static data (when the manifest has it) as env.STATIC_DATA, the Durable Object and KV namespaces, the R2 buckets, and the service bindings with
 * their targets' script names (`services`: binding name → script name).
 */
export function workerBindingsOf(manifest: WorkerManifest, services: ReadonlyMap<string, string>): WorkerBinding[] {
  return [
    ...Object.entries(manifest.vars ?? {}).map(
      ([name, value]): WorkerBinding => (typeof value === 'string' ? {type: 'text', name, text: value} : {type: 'json', name, json: value}),
    ),
    // Only a manifest that has staticData binds it: a wrangler project's env holds its own bindings alone.
    ...(manifest.staticData === undefined ? [] : [{type: 'json', name: STATIC_DATA_BINDING, json: manifest.staticData} as const]),
    ...(manifest.durableObjects ?? []).map((object): WorkerBinding => ({type: 'durable_object', name: object.binding, className: object.className})),
    ...(manifest.kvNamespaces ?? []).map((namespace): WorkerBinding => ({type: 'kv_namespace', name: namespace.binding, namespaceId: namespace.id})),
    ...(manifest.d1Databases ?? []).map((database): WorkerBinding => ({type: 'd1_database', name: database.binding, databaseId: d1DatabaseIdOf(database)})),
    ...(manifest.r2Buckets ?? []).map((bucket): WorkerBinding => ({type: 'r2_bucket', name: bucket.binding, bucketName: bucket.bucketName})),
    ...(manifest.queues?.producers ?? []).map(
      (producer): WorkerBinding => ({type: 'queue', name: producer.binding, queue: producer.queue, deliveryDelay: producer.deliveryDelay ?? 0}),
    ),
    ...(manifest.services ?? []).map((service): WorkerBinding => {
      const scriptName = services.get(service.binding)
      if (scriptName === undefined) throw new Error(`service binding ${service.binding} was not resolved`)
      return {type: 'service', name: service.binding, scriptName}
    }),
    ...(manifest.assets?.binding ? [{type: 'assets', name: manifest.assets.binding} as const] : []),
  ]
}

/** The queues the Worker's queue() handler consumes, Cloudflare's defaults filled in. */
export function queueConsumersOf(manifest: WorkerManifest): QueueConsumer[] {
  return (manifest.queues?.consumers ?? []).map(queueConsumerOf)
}
