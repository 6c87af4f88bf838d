// The service Worker behind a Worker's KV namespaces, R2 buckets, D1 databases or queues, in its
// workerd config: one module whose SQLite-backed Durable Object class keeps the data in the Worker's
// Durable Object storage under a unique key that must never change.
import type {Binding} from '../protocol/management-api.js'
import type {BindingType} from './binding-metrics.js'
import {capnpString} from './capnp.js'

/** workerd's `durableObjectStorage` field: a disk service's name, or in memory. */
export function durableObjectStorage(storage: string | 'memory'): string {
  return storage === 'memory' ? 'durableObjectStorage = (inMemory = void)' : `durableObjectStorage = (localDisk = ${capnpString(storage)})`
}

export interface StorageService {
  /** The service's name in the config (its socket's, where the host reaches it). */
  name: string
  module: string
  source: string
  objectClass: string
  uniqueKey: string
  /** The capnp bindings of the service's Worker; its Durable Object namespace among them. */
  bindings: string[]
  compatibilityFlags?: string[]
}

export function renderStorageService(service: StorageService, storage: string | 'memory'): string {
  const flags = service.compatibilityFlags ? `\n      compatibilityFlags = [${service.compatibilityFlags.map((flag) => capnpString(flag)).join(', ')}],` : ''
  return `(name = ${capnpString(service.name)}, worker = (
      modules = [(name = ${capnpString(service.module)}, esModule = ${capnpString(service.source)})],
      compatibilityDate = "2025-06-01",${flags}
      bindings = [${service.bindings.join(', ')}],
      durableObjectNamespaces = [(className = ${capnpString(service.objectClass)}, uniqueKey = ${capnpString(service.uniqueKey)}, enableSql = true)],
      ${durableObjectStorage(storage)},
      globalOutbound = "egress"))`
}

/**
 * A kind of binding whose data a storage service keeps (KV namespaces, D1 databases, R2 buckets):
 * every Worker with one or more gets one such service, its Durable Objects in the Worker's storage.
 */
export interface StorageBindingKind {
  bindingType: Extract<Binding['type'], 'kv_namespace' | 'd1_database' | 'r2_bucket'>
  metricsType: BindingType
  /** The service's name in a Worker's config (and its socket's, where the host reaches it). */
  serviceName(script: string): string
  /** Suffix of the storage directory name and object-id key; must never change. */
  uniqueKeySuffix: string
  module: string
  source: string
  objectClass: string
  /** The name the service's Worker binds its Durable Object namespace under. */
  namespacesBinding: string
}

export function usesStorageKind(kind: StorageBindingKind, script: {bindings: Binding[]}): boolean {
  return script.bindings.some((binding) => binding.type === kind.bindingType)
}

/** The Worker's storage service of this kind, if it has such bindings. `storage`: its Durable Object disk service, or "memory". */
export function renderStorageKindServices(kind: StorageBindingKind, script: {name: string; bindings: Binding[]}, storage: string | 'memory' | null): string[] {
  if (!usesStorageKind(kind, script) || storage === null) return []
  return [
    renderStorageService(
      {
        name: kind.serviceName(script.name),
        module: kind.module,
        source: kind.source,
        objectClass: kind.objectClass,
        // "-" never appears in a class name, so no Durable Object class of the Worker shares it.
        uniqueKey: `${script.name}:${kind.uniqueKeySuffix}`,
        bindings: [`(name = ${capnpString(kind.namespacesBinding)}, durableObjectNamespace = ${capnpString(kind.objectClass)})`],
      },
      storage,
    ),
  ]
}
