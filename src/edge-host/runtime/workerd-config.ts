// Renders workerd configs (Cap'n Proto text). Two kinds, from the same per-script rendering so a
// script validated alone runs the same way inside its shard:
//
// - a shard: one socket per script (named after the script; the data plane proxies straight to it —
//   a routing Worker in front would halve throughput), plus a `health` socket so a shard without
//   scripts still reports that it listens (and the watchdog can probe it); Durable Objects on disk
//   under <data dir>/do/<script>/.
//
// The host gives every socket a Unix address in a directory of its 0700 runtime dir (see
// RenderOptions socketAddress): only the host's user can reach a Worker directly, around its policy.
// - a validation sandbox: scripts apart from any shard, Durable Objects in memory.
//
// Every Worker's global fetch() goes through the `egress` network service, which by default allows
// public addresses only (no private-network egress). Module bodies are embedded from the module
// cache; text, JSON and secret values are inlined, so a rendered config is written 0600 and deleted
// once workerd has read it.
import {SERVICE_ACCOUNTS_BINDING, type ModuleType} from '../../protocol/management-api.js'
import type {RunnableScript} from '../state.js'

/** The socket every shard has besides its scripts' sockets. */
export const HEALTH_SOCKET = 'health'

const HEALTH_WORKER = `(name = "${HEALTH_SOCKET}", worker = (
      modules = [(name = "health.js", esModule = "export default { fetch() { return new Response('ok') } }")],
      compatibilityDate = "2025-01-01"))`

const MODULE_FIELD: Record<ModuleType, string> = {
  esModule: 'esModule',
  commonJs: 'commonJsModule',
  text: 'text',
  json: 'json',
  data: 'data',
  wasm: 'wasm',
}

export interface RenderOptions {
  /** Where a module's bytes are, relative to the config file (see ModuleCache). */
  modulePath: (sha256: string) => string
  /** Network blocks Workers may reach (workerd Network.allow); ["public"] by default. */
  egressAllow: string[]
  /** The workerd address of the socket serving `service`: `unix:<path>` on the host. */
  socketAddress: (service: string) => string
}

/** A rendered config and the names of the sockets workerd reports once it listens. */
export interface RenderedConfig {
  text: string
  sockets: string[]
}

export function renderShardConfig(scripts: RunnableScript[], options: RenderOptions & {durableObjectRoot: (script: string) => string}): RenderedConfig {
  const services = [HEALTH_WORKER]
  for (const script of scripts) {
    const storage = usesDurableObjects(script) ? diskServiceName(script.name) : null
    services.push(renderWorker(script, options, storage))
    if (storage) services.push(`(name = ${capnpString(storage)}, disk = (path = ${capnpString(options.durableObjectRoot(script.name))}, writable = true))`)
  }
  services.push(renderEgress(options.egressAllow))
  return renderConfig(services, [HEALTH_SOCKET, ...scripts.map((script) => script.name)], options.socketAddress)
}

export function renderValidationConfig(scripts: RunnableScript[], options: RenderOptions): RenderedConfig {
  const workers = scripts.map((script) => renderWorker(script, options, usesDurableObjects(script) ? 'memory' : null))
  return renderConfig([...workers, renderEgress(options.egressAllow)], scripts.map((script) => script.name), options.socketAddress)
}

export function usesDurableObjects(script: RunnableScript): boolean {
  return script.bindings.some((binding) => binding.type === 'durable_object_namespace')
}

/** Each socket is named after the service it serves. */
function renderConfig(services: string[], socketServices: string[], socketAddress: (service: string) => string): RenderedConfig {
  const sockets = socketServices.map(
    (service) => `(name = ${capnpString(service)}, address = ${capnpString(socketAddress(service))}, http = (), service = ${capnpString(service)})`,
  )
  const text = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    ${services.join(',\n    ')}
  ],
  sockets = [
    ${sockets.join(',\n    ')}
  ]
);
`
  return {text, sockets: socketServices}
}

/** `storage`: a disk service name, "memory", or null when the script has no Durable Objects. */
function renderWorker(script: RunnableScript, options: RenderOptions, storage: string | 'memory' | null): string {
  // workerd treats the first module as the main one.
  const modules = [...script.modules].sort((a, b) => Number(b.name === script.mainModule) - Number(a.name === script.mainModule))
  const moduleList = modules.map((module) => `(name = ${capnpString(module.name)}, ${MODULE_FIELD[module.type]} = embed ${capnpString(options.modulePath(module.sha256))})`)

  const bindings: string[] = []
  const namespaces: string[] = []
  for (const binding of script.bindings) {
    if (binding.type === 'plain_text') bindings.push(`(name = ${capnpString(binding.name)}, text = ${capnpString(binding.text)})`)
    else if (binding.type === 'json') bindings.push(`(name = ${capnpString(binding.name)}, json = ${capnpString(JSON.stringify(binding.json))})`)
    else {
      bindings.push(`(name = ${capnpString(binding.name)}, durableObjectNamespace = (className = ${capnpString(binding.className)}))`)
      // The unique key names the storage directory and derives object ids: it must never change.
      namespaces.push(`(className = ${capnpString(binding.className)}, uniqueKey = ${capnpString(`${script.name}:${binding.className}`)}, enableSql = true)`)
    }
  }
  for (const secret of script.secrets) bindings.push(`(name = ${capnpString(secret.name)}, text = ${capnpString(secret.value)})`)
  if (script.serviceAccounts.length > 0) {
    const accounts = Object.fromEntries(script.serviceAccounts.map((account) => [account.id, {username: account.username, password: account.password}]))
    bindings.push(`(name = "${SERVICE_ACCOUNTS_BINDING}", json = ${capnpString(JSON.stringify(accounts))})`)
  }

  const fields = [
    `modules = [${moduleList.join(', ')}]`,
    `compatibilityDate = ${capnpString(script.compatibilityDate)}`,
    `compatibilityFlags = [${script.compatibilityFlags.map(capnpString).join(', ')}]`,
    `bindings = [${bindings.join(', ')}]`,
    `globalOutbound = "egress"`,
  ]
  if (namespaces.length > 0) {
    fields.push(`durableObjectNamespaces = [${namespaces.join(', ')}]`)
    fields.push(storage === 'memory' ? 'durableObjectStorage = (inMemory = void)' : `durableObjectStorage = (localDisk = ${capnpString(storage!)})`)
  }
  return `(name = ${capnpString(script.name)}, worker = (\n      ${fields.join(',\n      ')}))`
}

function renderEgress(allow: string[]): string {
  return `(name = "egress", network = (allow = [${allow.map(capnpString).join(', ')}]))`
}

function diskServiceName(script: string): string {
  return `do:${script}`
}

/** A Cap'n Proto text literal: quotes and backslashes escaped, control characters as \xHH. */
function capnpString(value: string): string {
  let out = '"'
  for (const character of value) {
    const code = character.codePointAt(0)!
    if (character === '"' || character === '\\') out += `\\${character}`
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`
    else out += character
  }
  return `${out}"`
}
