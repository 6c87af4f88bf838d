// The service Worker behind a Worker's KV namespaces, R2 buckets, D1 databases or queues, in its
// workerd config: one module whose SQLite-backed Durable Object class keeps the data in the Worker's
// Durable Object storage under a unique key that must never change.
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
