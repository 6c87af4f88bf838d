// Renders workerd configs (Cap'n Proto text). Two kinds, from the same per-script rendering so a
// script validated alone runs the same way inside its shard:
//
// - a shard: one socket on 127.0.0.1:0 → the `router` worker, which hands each request to the
//   script named by the first label of its Host header (the data plane sets it) via a service
//   binding; every script's Durable Objects on disk under <data dir>/do/<script>/.
// - a validation sandbox: one script alone, socket straight to it, Durable Objects in memory.
//
// Every Worker's global fetch() goes through the `egress` network service, which by default allows
// public addresses only (no private-network egress). Module bodies are embedded from the module
// cache; text, JSON and secret values are inlined, so a rendered config is written 0600 and deleted
// once workerd has read it.
import {SERVICE_ACCOUNTS_BINDING, type ModuleType} from '../../protocol/management-api.js'
import type {RunnableScript} from '../state.js'

/** Compatibility date of the router; any date this workerd supports works. */
const ROUTER_COMPATIBILITY_DATE = '2025-01-01'

const ROUTER_SOURCE = `export default {
  fetch(request, env) {
    const host = new URL(request.url).hostname
    const script = env[host.slice(0, host.indexOf('.'))]
    return script ? script.fetch(request) : new Response('no such script on this shard', {status: 421})
  },
}`

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
}

export function renderShardConfig(scripts: RunnableScript[], options: RenderOptions & {durableObjectRoot: (script: string) => string}): string {
  const router = `(name = "router", worker = (
      modules = [(name = "router.js", esModule = ${capnpString(ROUTER_SOURCE)})],
      compatibilityDate = "${ROUTER_COMPATIBILITY_DATE}",
      bindings = [${scripts.map((script) => `(name = ${capnpString(script.name)}, service = ${capnpString(script.name)})`).join(', ')}],
      globalOutbound = "egress"))`
  const services = [router]
  for (const script of scripts) {
    const storage = usesDurableObjects(script) ? diskServiceName(script.name) : null
    services.push(renderWorker(script, options, storage))
    if (storage) services.push(`(name = ${capnpString(storage)}, disk = (path = ${capnpString(options.durableObjectRoot(script.name))}, writable = true))`)
  }
  services.push(renderEgress(options.egressAllow))
  return renderConfig(services, 'router')
}

export function renderValidationConfig(script: RunnableScript, options: RenderOptions): string {
  return renderConfig([renderWorker(script, options, usesDurableObjects(script) ? 'memory' : null), renderEgress(options.egressAllow)], script.name)
}

export function usesDurableObjects(script: RunnableScript): boolean {
  return script.bindings.some((binding) => binding.type === 'durable_object_namespace')
}

function renderConfig(services: string[], socketService: string): string {
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    ${services.join(',\n    ')}
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = ${capnpString(socketService)})]
);
`
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
export function capnpString(value: string): string {
  let out = '"'
  for (const character of value) {
    const code = character.codePointAt(0)!
    if (character === '"' || character === '\\') out += `\\${character}`
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`
    else out += character
  }
  return `${out}"`
}
