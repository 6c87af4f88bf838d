// Renders workerd configs (Cap'n Proto text). Two kinds, from the same per-script rendering so a
// script validated alone runs the same way inside its shard:
//
// - a shard: one socket per script it runs from its config (named after the script; the data plane
//   proxies straight to it), plus a `health` socket so a shard without scripts still reports that it
//   listens (and the watchdog can probe it); Durable Objects on disk under <data dir>/do/<script>/.
//   Under host.code_loading = "loader" it also has the loader Worker on a `loader` socket, which
//   runs the scripts deployed to the shard after its process started (./loader-worker.ts), and
//   those a process replacing a runaway left to it.
//
// The host gives every socket a Unix address in a directory of its 0700 runtime dir (see
// RenderOptions socketAddress): only the host's user can reach a Worker directly, around its policy.
// - a validation sandbox: scripts apart from any shard, Durable Objects in memory.
//
// A Worker whose traces someone reads (a live tail, the Worker log file; or with Durable Objects) names the shard's tail
// Worker in `tails`, with its script name in the props: after each invocation workerd hands the trace — request, status,
// outcome, console lines, uncaught exceptions — to the tail Worker, which counts it and posts counters, and the full traces
// someone reads, to the host's tail listener (../edge-host/tail-hub.ts, ./tail-worker.ts). Any other Worker runs behind
// the counting main module, which counts the same at a hundredth of the cost (./worker-counts.ts).
//
// Every Worker's global fetch() goes through the `egress` network service, which by default allows
// public addresses only (no private-network egress). A service binding is an external service per
// binding that points at the host's service-binding listener (a unix socket under the data dir)
// with a header naming the target script, which workerd sets on every request itself: the host
// routes it to the target's current release on whichever shard runs it, so the caller's config
// never names a shard or a port and survives the target's redeploys. Module bodies are embedded from the module
// cache; text, JSON and secret values are inlined, so a rendered config is written 0600 and deleted
// once workerd has read it.
import {OPERATION_SETTINGS_BINDING, RUNTIME_CONFIG_BINDING, SERVICE_ACCOUNTS_BINDING, type Binding, type ModuleType} from '../protocol/management-api.js'
import {type RunnableScript, scriptOfService} from './script.js'
import {CRON_SOCKET, renderCronServices} from './cron-config.js'
import {KV_STORAGE, renderKvBinding} from './kv-config.js'
import {D1_STORAGE, d1Sockets, renderD1Binding} from './d1-config.js'
import {R2_STORAGE, renderR2Binding} from './r2-config.js'
import {CLOUDFLARE_KV_SIZES, type KvSizeLimits} from './kv-worker.js'
import {capnpString} from './capnp.js'
import {durableObjectStorage, renderStorageKindServices, usesStorageKind} from './storage-service.js'
import {queueServiceName, queueSockets, renderQueueBinding, renderQueueServices, usesQueues} from './queue-config.js'
import {BINDING_METRICS_SOCKET, type BindingServices, renderBindingMetricsServices} from './binding-metrics.js'
import {LOADER_SOCKET, loaderWorkerSource} from './loader-worker.js'
import {renderTailServices, TAIL_SERVICE, TAIL_SINK_SERVICE, TAIL_WORKER_SOURCE} from './tail-worker.js'
import {COUNTING_MODULE, countingModuleSource, renderWorkerCountsServices, WORKER_COUNTS_SOCKET} from './worker-counts.js'

/** The socket every shard has besides its scripts' sockets. */
export const HEALTH_SOCKET = 'health'

const HEALTH_WORKER = `(name = "${HEALTH_SOCKET}", worker = (
      modules = [(name = "health.js", esModule = "export default { fetch() { return new Response('ok') } }")],
      compatibilityDate = "2025-01-01"))`

/** Source maps are the host's (../edge-host/tail-hub.ts maps stacks with them); workerd never loads them. */
const MODULE_FIELD: Record<Exclude<ModuleType, 'sourceMap'>, string> = {
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
  /** workerd address of the host's service-binding listener, e.g. `unix:/var/lib/host/runtime/services.sock`. */
  serviceBindingAddress: string
  /** The workerd address of the socket serving `service`: `unix:<path>` on the host. */
  socketAddress: (service: string) => string
  /** What Workers' KV namespaces refuse past (host.kv_max_*_bytes); Cloudflare's sizes when absent. */
  kvSizes?: KvSizeLimits
}

/** The header carrying a service binding's target script; workerd sets it, the host strips it. */
export const SERVICE_TARGET_HEADER = 'x-edgeworkers-service-target'
/** The header naming the calling script, for its subrequest count; set and stripped the same way. */
export const SERVICE_CALLER_HEADER = 'x-edgeworkers-service-caller'
/** A service-binding target naming a script's own static assets (its `assets` binding), not the script. */
export const ASSETS_TARGET_PREFIX = 'assets:'

/** Where a binding that calls through the host goes: another script, or the script's own assets; null for other bindings. */
export function serviceTargetOf(script: {name: string}, binding: Binding): string | null {
  if (binding.type === 'service') return binding.script
  if (binding.type === 'assets') return `${ASSETS_TARGET_PREFIX}${script.name}`
  return null
}

/**
 * The validation sandbox runs each script behind this module, as its main: it imports the real
 * main module and throws — so workerd refuses to start, naming the script — when there is no
 * default export with a fetch handler (every Worker answers its own route), a queue consumer has no
 * queue handler, or a Durable Object class
 * the bindings name is not exported (workerd itself only warns about that).
 */
export const CHECK_MODULE = '__edgeworkers_check__.js'

function checkModuleSource(mainModule: string, classNames: string[], consumesQueues: boolean): string {
  const main = JSON.stringify(mainModule)
  return [
    `import * as main from ${main};`,
    'const handler = main.default;',
    `if (typeof handler?.fetch !== "function" && typeof handler?.prototype?.fetch !== "function") throw new Error(${JSON.stringify(`the main module ${mainModule} has no default export with a fetch handler`)});`,
    ...(consumesQueues
      ? [
          `if (typeof handler?.queue !== "function" && typeof handler?.prototype?.queue !== "function") throw new Error(${JSON.stringify(`the main module ${mainModule} consumes queues but its default export has no queue handler`)});`,
        ]
      : []),
    ...classNames.map(
      (className) =>
        `if (typeof main[${JSON.stringify(className)}] !== "function") throw new Error(${JSON.stringify(`the main module ${mainModule} does not export the Durable Object class ${className}`)});`,
    ),
    'export default handler;',
    `export * from ${main};`,
  ].join('\n')
}

/** A rendered config and the names of the sockets workerd reports once it listens. */
export interface RenderedConfig {
  text: string
  sockets: string[]
}

/**
 * A shard's config: `scripts` each on its own socket; with `loaderCodeAddress` (the workerd address
 * of the host's code listener) also the loader Worker on its socket, for the scripts the shard loads.
 */
export function renderShardConfig(
  scripts: RunnableScript[],
  options: RenderOptions & {
    durableObjectRoot: (script: string) => string /** workerd address of the host's tail listener; null: no tail Worker. */
    tailSinkAddress: string | null /** Whether the tail Worker gets the script's traces; if not, the counting main module counts. */
    traced: (script: RunnableScript) => boolean
    loaderCodeAddress: string | null
    /** host.experimental: the loader lets the Workers it loads use flags workerd marks experimental. */
    experimental: boolean
  },
): RenderedConfig {
  const tailed = options.tailSinkAddress !== null
  const services = [HEALTH_WORKER, ...(tailed ? renderTailServices(options.tailSinkAddress!) : [])]
  const counted: string[] = []
  for (const script of scripts) {
    const storage = usesDurableObjects(script) ? diskServiceName(scriptOfService(script.name).script) : null
    const events = !tailed ? undefined : options.traced(script) ? 'traced' : 'counted'
    if (events === 'counted') counted.push(script.name)
    services.push(renderWorker(script, options, storage, {events}), ...renderServiceBindingTargets(script, options))
  }
  const workers = workersOf(scripts)
  for (const worker of workers) {
    const storage = usesDurableObjects(worker) ? diskServiceName(worker.name) : null
    services.push(...renderStorageServices(worker, storage, true, options.kvSizes))
    if (storage) services.push(`(name = ${capnpString(storage)}, disk = (path = ${capnpString(options.durableObjectRoot(worker.name))}, writable = true))`)
  }
  const loaded = options.loaderCodeAddress !== null
  if (loaded) services.push(...renderLoaderServices(options.loaderCodeAddress!, options.serviceBindingAddress, {tailed, experimental: options.experimental}))
  const cron = renderCronServices(scripts)
  const bindingMetrics = renderBindingMetricsServices(new Map(workers.map((worker) => [worker.name, bindingServicesOf(worker)])))
  const workerCounts = renderWorkerCountsServices(counted)
  services.push(...cron, ...bindingMetrics, ...workerCounts, renderEgress(options.egressAllow))
  const sockets = [
    HEALTH_SOCKET,
    ...(loaded ? [LOADER_SOCKET] : []),
    ...(cron.length > 0 ? [CRON_SOCKET] : []),
    ...(bindingMetrics.length > 0 ? [BINDING_METRICS_SOCKET] : []),
    ...(workerCounts.length > 0 ? [WORKER_COUNTS_SOCKET] : []),
    ...scripts.map((script) => script.name),
    ...d1Sockets(workers),
    ...queueSockets(workers),
  ]
  return renderConfig(services, sockets, options.socketAddress)
}

/**
 * The loader Worker (./loader-worker.ts) and the host listeners it reaches. Its own invocations are not
 * tailed. Under host.experimental it has workerd's `experimental` flag, which workerd requires of a
 * Worker that lets the Workers it loads use experimental flags (`allowExperimental`).
 */
function renderLoaderServices(codeAddress: string, serviceBindingAddress: string, options: {tailed: boolean; experimental: boolean}): string[] {
  const {tailed, experimental} = options
  const tailModule = tailed ? 'tail.js' : null
  const source = loaderWorkerSource({tailModule, serviceTargetHeader: SERVICE_TARGET_HEADER, serviceCallerHeader: SERVICE_CALLER_HEADER, experimental})
  const modules = [
    `(name = "loader.js", esModule = ${capnpString(source)})`,
    ...(tailed ? [`(name = "tail.js", esModule = ${capnpString(TAIL_WORKER_SOURCE)})`] : []),
  ]
  const bindings = [
    '(name = "LOADER", workerLoader = ())',
    '(name = "EGRESS", service = "egress")',
    `(name = "CODE", service = "${LOADER_CODE_SERVICE}")`,
    `(name = "HOST_SERVICES", service = "${LOADER_SERVICES_SERVICE}")`,
    ...(tailed ? [`(name = "SINK", service = "${TAIL_SINK_SERVICE}")`] : []),
  ]
  return [
    `(name = "${LOADER_SOCKET}", worker = (
      modules = [${modules.join(', ')}],
      compatibilityDate = "2025-06-01",
      compatibilityFlags = [${['"enable_ctx_exports"', ...(experimental ? ['"experimental"'] : [])].join(', ')}],
      bindings = [${bindings.join(', ')}]))`,
    `(name = "${LOADER_CODE_SERVICE}", external = (address = ${capnpString(codeAddress)}, http = ()))`,
    `(name = "${LOADER_SERVICES_SERVICE}", external = (address = ${capnpString(serviceBindingAddress)}, http = ()))`,
  ]
}

const LOADER_CODE_SERVICE = 'edgeworkers-code'
const LOADER_SERVICES_SERVICE = 'edgeworkers-services'

export function renderValidationConfig(scripts: RunnableScript[], options: RenderOptions): RenderedConfig {
  const workers = scripts.flatMap((script) => {
    const storage = usesDurableObjects(script) ? 'memory' : null
    return [
      renderWorker(script, options, storage, {checked: true}),
      ...renderServiceBindingTargets(script, options),
      ...renderStorageServices(script, storage, false, options.kvSizes),
    ]
  })
  return renderConfig(
    [...workers, renderEgress(options.egressAllow)],
    scripts.map((script) => script.name),
    options.socketAddress,
  )
}

const STORAGE_KINDS = [KV_STORAGE, D1_STORAGE, R2_STORAGE]

/**
 * The Workers of a shard's `scripts`, each once, as its storage services serve it: a Worker's data
 * is one whatever the version (Cloudflare does not version KV, D1, R2 or queue contents), so a split
 * release (splitServiceName) reaches its Worker's services, which serve the storage bindings of
 * both releases under the Worker's name. Its queue consumers are the current release's: queue()
 * and scheduled() run there during a split (README "Gradual deployments").
 */
export function workersOf(scripts: readonly RunnableScript[]): RunnableScript[] {
  const workers = new Map<string, RunnableScript>()
  for (const script of scripts) {
    const {script: name, split} = scriptOfService(script.name)
    const known = workers.get(name)
    if (!known) workers.set(name, split ? {...script, name, crons: [], queueConsumers: []} : script)
    else if (split) workers.set(name, {...known, bindings: [...known.bindings, ...script.bindings.filter(isStorageBinding)]})
    else workers.set(name, {...script, bindings: [...script.bindings, ...known.bindings.filter(isStorageBinding)]})
  }
  return [...workers.values()]
}

const STORAGE_BINDINGS: ReadonlySet<Binding['type']> = new Set(['kv_namespace', 'd1_database', 'r2_bucket', 'queue'])

function isStorageBinding(binding: Binding): boolean {
  return STORAGE_BINDINGS.has(binding.type)
}

/**
 * The service Workers behind the script's KV namespaces, D1 databases, R2 buckets and queues, in its
 * Durable Object storage (`storage`; null: it has none). `deliver`: its queue consumer is sent messages.
 */
function renderStorageServices(script: RunnableScript, storage: string | 'memory' | null, deliver: boolean, kvSizes = CLOUDFLARE_KV_SIZES): string[] {
  return [...STORAGE_KINDS.flatMap((kind) => renderStorageKindServices(kind, script, storage, {kvSizes})), ...renderQueueServices(script, storage, deliver)]
}

/** Whether the script has Durable Object storage: its own classes, or its KV namespaces, D1 databases, R2 buckets or queues (./kv-config.ts, ./d1-config.ts, ./r2-config.ts, ./queue-config.ts). */
export function usesDurableObjects(script: RunnableScript): boolean {
  return (
    script.bindings.some((binding) => binding.type === 'durable_object_namespace') ||
    STORAGE_KINDS.some((kind) => usesStorageKind(kind, script)) ||
    usesQueues(script)
  )
}

/** The binding services a script has in its shard (./binding-metrics.ts reads their counts). */
function bindingServicesOf(script: RunnableScript): BindingServices {
  return [
    ...STORAGE_KINDS.filter((kind) => usesStorageKind(kind, script)).map((kind) => ({service: kind.serviceName(script.name), type: kind.metricsType})),
    ...(usesQueues(script) ? [{service: queueServiceName(script.name), type: 'queue' as const}] : []),
  ]
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

/**
 * `storage`: a disk service name, "memory", or null when the script has no Durable Objects. `checked`: run behind the
 * check module (validation sandboxes). `events`: traces go to the tail Worker, or the counting main module counts (./worker-counts.ts).
 */
type WorkerFlags = {checked?: boolean; events?: 'traced' | 'counted'}
function renderWorker(script: RunnableScript, options: RenderOptions, storage: string | 'memory' | null, {checked = false, events}: WorkerFlags = {}): string {
  // workerd treats the first module as the main one.
  const modules = [...script.modules].sort((a, b) => Number(b.name === script.mainModule) - Number(a.name === script.mainModule))
  const moduleList = modules.flatMap(({name, type, sha256}) =>
    type === 'sourceMap' ? [] : [`(name = ${capnpString(name)}, ${MODULE_FIELD[type]} = embed ${capnpString(options.modulePath(sha256))})`],
  )
  if (events === 'counted') moduleList.unshift(`(name = "${COUNTING_MODULE}", esModule = ${capnpString(countingModuleSource(script.mainModule))})`)
  if (checked) {
    const classNames = script.bindings.flatMap((binding) => (binding.type === 'durable_object_namespace' ? [binding.className] : []))
    moduleList.unshift(
      `(name = "${CHECK_MODULE}", esModule = ${capnpString(checkModuleSource(script.mainModule, classNames, script.queueConsumers.length > 0))})`,
    )
  }

  const bindings = valueBindings(script).map((binding) =>
    'text' in binding
      ? `(name = ${capnpString(binding.name)}, text = ${capnpString(binding.text)})`
      : `(name = ${capnpString(binding.name)}, json = ${capnpString(binding.json)})`,
  )
  const namespaces: string[] = []
  // A split release reaches its Worker's storage services (workersOf).
  const worker = scriptOfService(script.name).script
  for (const binding of script.bindings) {
    if (serviceTargetOf(script, binding) !== null)
      bindings.push(`(name = ${capnpString(binding.name)}, service = ${capnpString(serviceBindingTargetName(script.name, binding.name))})`)
    else if (binding.type === 'durable_object_namespace') {
      bindings.push(`(name = ${capnpString(binding.name)}, durableObjectNamespace = (className = ${capnpString(binding.className)}))`)
      // The unique key names the storage directory and derives object ids: it must never change.
      namespaces.push(`(className = ${capnpString(binding.className)}, uniqueKey = ${capnpString(`${script.name}:${binding.className}`)}, enableSql = true)`)
    } else if (binding.type === 'kv_namespace') bindings.push(renderKvBinding(worker, binding))
    else if (binding.type === 'd1_database') bindings.push(renderD1Binding(worker, binding))
    else if (binding.type === 'r2_bucket') bindings.push(renderR2Binding(worker, binding))
    else if (binding.type === 'queue') bindings.push(renderQueueBinding(worker, binding))
  }

  const fields = [
    `modules = [${moduleList.join(', ')}]`,
    `compatibilityDate = ${capnpString(script.compatibilityDate)}`,
    `compatibilityFlags = [${script.compatibilityFlags.map(capnpString).join(', ')}]`,
    `bindings = [${bindings.join(', ')}]`,
    `globalOutbound = "egress"`,
  ]
  if (events === 'traced') fields.push(`tails = [(name = "${TAIL_SERVICE}", props = (json = ${capnpString(JSON.stringify({script: script.name}))}))]`)
  if (namespaces.length > 0) {
    fields.push(`durableObjectNamespaces = [${namespaces.join(', ')}]`)
    fields.push(durableObjectStorage(storage!))
  }
  return `(name = ${capnpString(script.name)}, worker = (\n      ${fields.join(',\n      ')}))`
}

/** A binding whose value is text or JSON (text), as the Worker's env holds it. */
export type ValueBinding = {name: string; text: string} | {name: string; json: string}

/**
 * The bindings of `script` that are values: its text and JSON bindings, secrets, service accounts,
 * runtime config and operation settings — the same env whether workerd's config or the Worker
 * Loader (./loader-worker.ts) gives it to the Worker.
 */
export function valueBindings(script: RunnableScript): ValueBinding[] {
  const values: ValueBinding[] = []
  for (const binding of script.bindings) {
    if (binding.type === 'plain_text') values.push({name: binding.name, text: binding.text})
    else if (binding.type === 'json') values.push({name: binding.name, json: JSON.stringify(binding.json)})
  }
  for (const secret of script.secrets) values.push({name: secret.name, text: secret.value})
  if (script.serviceAccounts.length > 0) {
    const accounts = Object.fromEntries(script.serviceAccounts.map((account) => [account.id, {username: account.username, password: account.password}]))
    values.push({name: SERVICE_ACCOUNTS_BINDING, json: JSON.stringify(accounts)})
  }
  if (script.runtimeConfig.length > 0) {
    values.push({name: RUNTIME_CONFIG_BINDING, json: `{${script.runtimeConfig.map((entry) => `${JSON.stringify(entry.key)}:${entry.valueJson}`).join(',')}}`})
  }
  if (script.operationSettingsJson !== null) values.push({name: OPERATION_SETTINGS_BINDING, json: script.operationSettingsJson})
  return values
}

/** One external service per service binding of `script` (see the header comment). */
function renderServiceBindingTargets(script: RunnableScript, options: RenderOptions): string[] {
  return script.bindings.flatMap((binding) => {
    const target = serviceTargetOf(script, binding)
    return target !== null
      ? [
          `(name = ${capnpString(serviceBindingTargetName(script.name, binding.name))}, external = (address = ${capnpString(options.serviceBindingAddress)}, ` +
            `http = (injectRequestHeaders = [(name = "${SERVICE_TARGET_HEADER}", value = ${capnpString(target)}), ` +
            `(name = "${SERVICE_CALLER_HEADER}", value = ${capnpString(script.name)})])))`,
        ]
      : []
  })
}

function serviceBindingTargetName(script: string, binding: string): string {
  return `service:${script}:${binding}`
}

function renderEgress(allow: string[]): string {
  return `(name = "egress", network = (allow = [${allow.map(capnpString).join(', ')}]))`
}

function diskServiceName(script: string): string {
  return `do:${script}`
}
