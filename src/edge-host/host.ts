// Starts and stops one edge host: host state, identity, workerd shards, the data-plane listener and
// the management listener. `edgeworkers host serve` is a thin wrapper around startHost(); tests run
// hosts in-process through it too.
//
// Data dir layout: host.sqlite (state), identity.key (Ed25519, 0600), host.json and host.lock (the running
// host's addresses; its pid and start time), runtime/ and do/ (runtime/runtime.ts), runtime/snapshots/ (services/snapshot.ts).
import {AssetFiles} from './assets/files.js'
import {AssetCollector} from './assets/management.js'
import {AssetServer} from './assets/serve.js'
import type {Agent} from 'undici'
import {existsSync} from 'node:fs'
import type http from 'node:http'
import path from 'node:path'
import pino, {type Logger} from 'pino'
import {settingsSchema} from '../config/schema.js'
import {KitError} from '../errors.js'
import {redactingLogOptions} from '../util/log-redaction.js'
import {parseLoadedSourceMaps} from '../util/source-maps.js'
import {ensurePrivateDir} from '../util/private-files.js'
import {BodyBudget} from './http/body-limits.js'
import {ConnectionGuard, connectionBudget} from './http/connection-guard.js'
import {hostReadiness} from './kit-readiness.js'
import {HeapReclaim} from './http/heap-reclaim.js'
import {createDataPlaneServer, createServiceBindingServer} from './http/data-plane.js'
import {readFdLimit} from './http/fd-limit.js'
import {behindFront, closeServer, listen, listenOnPrivateSocket, parseListenAddress, urlOf, type ListenAddress} from './http/common.js'
import {chooseFront} from './front/front-choice.js'
import {frontDoor, frontRuntimeHooks} from './front/host-front.js'
import type {HaproxyFront} from './front/front.js'
import {loadOrCreateIdentity} from './identity.js'
import {createManagementServer} from './http/management-server.js'
import {HostMetrics, UNKNOWN_SCRIPT_LABEL} from './metrics.js'
import {BindingOperations} from './binding-operations.js'
import {PairingLimiter} from './http/pairing-limiter.js'
import {WorkerdRuntime} from './runtime/runtime.js'
import {serviceBindingSocketPath, tailSocketPath} from './runtime/data-dir-paths.js'
import type {Shard} from './runtime/shard.js'
import {HostService, type HostSettings} from './services/host-service.js'
import {clearSnapshotLeftovers} from './services/snapshot.js'
import {HostState, STATE_FILE} from './state/host-state.js'
import {scriptOfService} from '../workerd/script.js'
import {type HostInfo, writeHostInfo} from './host-info.js'
import {acquireLock, releaseLock} from './host-lock.js'
import {SourceMaps} from './source-maps.js'
import {createTailSinkServer, TailHub} from './tail-hub.js'
import {WorkerCounts} from './worker-counts.js'
import {CronScheduler} from './triggers/cron-scheduler.js'
import {WorkerLogFile} from './worker-log-file.js'

export interface HostOptions {
  dataDir: string
  /** The `[host]` settings; keys left out take their documented defaults. */
  settings?: Partial<HostSettings>
  /** fence.max_ttl_seconds: the longest fence the host accepts. */
  maxFenceTtlSeconds?: number
  /** JSON logs; defaults to pino on stdout at info. */
  logger?: Logger
  /** The clock cron triggers follow (ms since the epoch); Date.now unless a test moves time itself. */
  cronClock?: () => number
}

export interface RunningHost {
  dataDir: string
  /** Data plane: Workers at <publicUrl>/<script>/… and at <script>.<baseDomain>. */
  publicUrl: string
  /** Management API, /livez, /readyz, /metrics. */
  adminUrl: string
  listen: ListenAddress
  adminListen: ListenAddress
  fingerprint: string
  scope: string
  /** The front door this start runs: host.front resolved ("auto" becomes one of these). */
  front: 'node' | 'haproxy'
  /** The one-time pairing code, only on the start that created it (print it once, then never). */
  issuedPairingCode: string | null
  /** True while every shard serves. */
  ready(): boolean
  /** Runs the cron triggers that are due now (the host also does every second); resolves once they answered. */
  runDueCronTriggers(): Promise<void>
  /** Stops accepting, drains in-flight requests, stops workerd, closes the state. */
  stop(): Promise<void>
}

export async function startHost(options: HostOptions): Promise<RunningHost> {
  const settings = settingsSchema.shape.host.parse(options.settings ?? {})
  const maxFenceTtlSeconds = options.maxFenceTtlSeconds ?? settingsSchema.shape.fence.parse({}).max_ttl_seconds
  const log = options.logger ?? pino({base: {component: 'edge-host'}, timestamp: pino.stdTimeFunctions.isoTime, ...redactingLogOptions()})
  const dataDir = path.resolve(options.dataDir)
  const frontChoice = await chooseFront(settings.front) // before anything is written: "haproxy" without one is refused
  ensurePrivateDir(dataDir) // host.sqlite and identity.key hold secrets
  await acquireLock(dataDir)
  const fdLimit = readFdLimit()
  const maxConnections = settings.max_connections || connectionBudget(fdLimit.soft)
  const fdFigures = {fdLimit: fdLimit.soft, fdHardLimit: fdLimit.hard, maxConnections}
  if (!fdLimit.known) log.warn(fdFigures, 'file descriptor limit unknown (no /proc/self/limits): assumed')
  else if (fdLimit.soft < fdLimit.hard) log.warn(fdFigures, 'file descriptor limit below the hard limit')
  else log.info(fdFigures, 'file descriptor limit')

  const cleanups: Array<() => Promise<void> | void> = [() => releaseLock(dataDir)]
  const cleanUp = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  }
  try {
    const state = HostState.open(dataDir)
    cleanups.push(() => state.close())
    const identity = await loadOrCreateIdentity(dataDir)
    // The first start issues the code; later starts never show it again (`host pairing-code` does).
    const issuedPairingCode = !state.pairing.isPaired() && state.pairing.code() === null ? state.pairing.issueCode() : null

    let front: HaproxyFront | null = null
    const metrics = new HostMetrics({
      fenceActive: () => state.fences.active() !== null,
      scriptCounts: () => service.scriptCounts(),
      quarantinedCount: () => state.quarantine.scripts().length,
      openConnections: (): number => guard.openConnections,
      departmentOf: (script) => state.scripts.route(script)?.department ?? null,
      readBindingOperations: (): Promise<void> => bindingOperations.readAll(servingAgents()),
      readFrontRequests: async (): Promise<void> => front?.readCounters(),
      readWorkerCounts: (): Promise<void> => workerCounts.readAll(servingAgents()),
    })
    const bindingOperations = new BindingOperations(metrics)
    const tails = new TailHub({
      metrics,
      route: (script) => state.scripts.route(script),
      secretValues: (script) => state.credentials.secretValues(script),
      sourceMaps: new SourceMaps(state.scripts),
      logFile: settings.worker_log_file ? new WorkerLogFile(settings.worker_log_file, settings.worker_log_max_bytes, settings.worker_log_keep) : null,
      activityWindowSeconds: settings.worker_activity_window_seconds,
      maxEventsPerSecond: settings.tail_max_events_per_second,
      onTailsChanged: () => void front?.sync(),
      log,
    })
    const workerCounts = new WorkerCounts(tails)
    const servingAgents = (): Array<Agent | null> => runtime.shards.map((shard: Shard) => shard.servingAgent)
    state.onControl = (operation, outcome) => metrics.controlCalls.inc({operation, outcome})
    const ownShards = state.scripts.placeAtStart(settings.shards, settings.isolation_shards)
    const runtime = new WorkerdRuntime({
      dataDir,
      shardCount: settings.shards,
      coalesceWindowMs: settings.coalesce_window_ms,
      drainTimeoutMs: settings.drain_timeout_ms,
      startTimeoutMs: settings.start_timeout_ms,
      egressAllow: settings.egress_allow,
      kvSizes: {keyBytes: settings.kv_max_key_bytes, valueBytes: settings.kv_max_value_bytes, metadataBytes: settings.kv_max_metadata_bytes},
      experimental: settings.experimental,
      workerEvents: settings.worker_events,
      tracesWanted: (script): boolean => tails.wantsTraces(script),
      tracedRequestsPerSecond: settings.tail_max_events_per_second,
      onUntracedRequest: (script) => tails.countSampled(script, 1),
      codeLoading: settings.code_loading,
      maxStaleLoads: settings.loader_max_stale_loads,
      loaderSettleMs: settings.loader_settle_seconds * 1000,
      recycleMemoryBytes: settings.loader_recycle_memory_mb * 1024 * 1024,
      validationConcurrency: settings.validation_concurrency,
      scriptsOfShard: (index) => state.scripts.runnableScripts(index),
      moduleContent: (sha256) => state.scripts.moduleContent(sha256),
      log,
      onShardState: (index, shardState) => {
        metrics.shardUp.set({shard: String(index)}, shardState === 'up' ? 1 : 0)
        void front?.sync()
      },
      onSwapped: (index, event) => {
        void front?.sync()
        if (event.mode !== 'load') metrics.shardRestarts.inc({shard: String(index), reason: event.reason})
        metrics.swapSeconds.observe({reason: event.reason, mode: event.mode}, event.seconds)
      },
      watchdogIntervalMs: settings.watchdog_interval_ms,
      cpuLimitMs: settings.request_cpu_limit_ms,
      memoryLimitBytes: settings.shard_memory_limit_mb * 1024 * 1024,
      spareProcess: settings.spare_process,
      beforeStop: async (agent): Promise<void> => void (await Promise.all([bindingOperations.read(agent), workerCounts.read(agent)])),
      onSpareReady: (ready) => metrics.spareReady.set(ready ? 1 : 0),
      ...frontRuntimeHooks(() => front),
      onIncident: (index, kind, service) => {
        // A split release's incident counts against its Worker (../workerd/script.ts scriptOfService).
        const script = service === null ? null : scriptOfService(service).script
        metrics.incidents.inc({script: script ?? UNKNOWN_SCRIPT_LABEL, kind})
        if (script === null) return
        front?.condemn(script)
        const {incidents, quarantined} = state.quarantine.recordIncident(script, kind, settings.quarantine_after_incidents)
        log.warn({shard: index, kind, script, incidents}, 'incident counted against the script')
        if (!quarantined) {
          // Before its shard's replacement reads its scripts: the offender is not among them, and
          // it cannot hold its former neighbours' thread again.
          const own = state.scripts.isolate(script, settings.shards, settings.isolation_shards)
          if (own === null) return
          runtime.addShard(own)
          log.warn({shard: own, from: index, script}, 'worker moved to a shard of its own')
          return
        }
        metrics.quarantines.inc({script})
        // Its shard restarts without it (runnableScripts leaves it out) until a new release is deployed.
        log.error({shard: index, script, incidents}, 'worker.quarantined: its release is refused with 503 until the next deploy')
      },
    })
    for (const index of ownShards) runtime.addShard(index)
    cleanups.push(() => runtime.stop())
    front = frontDoor(frontChoice, {dataDir, settings, maxConnections, metrics, runtime, state, tails, log})
    let publicUrl = ''
    const assetFiles = new AssetFiles(dataDir)
    const service = new HostService({
      dataDir,
      state,
      assets: assetFiles,
      assetCollector: new AssetCollector(assetFiles, state, log, settings.asset_unreferenced_grace_seconds * 1000),
      runtime,
      identity,
      settings,
      maxFenceTtlSeconds,
      publicUrl: () => publicUrl,
      cronClock: options.cronClock ?? Date.now,
      onRetired: (name) => {
        tails.forget(name)
        bindingOperations.forget(name)
      },
      log,
    })
    const readiness = hostReadiness(runtime, settings.await_kit_confirmation, log)
    // An upload is base64 (4/3 of the bytes) inside JSON. Room for more than the limit, so a script
    // somewhat over it gets the precise script_too_large rather than request_too_large.
    const maxBodyBytes = 2 * settings.max_script_bytes + 1024 * 1024
    const bodyBudget = new BodyBudget(settings.max_held_body_bytes)

    const routing = {
      state,
      runtime,
      baseDomain: settings.base_domain,
      holdTimeoutMs: settings.request_hold_timeout_ms,
      signatureWindowSeconds: settings.signature_window_seconds,
      maxSignedBodyBytes: settings.max_signed_request_body_bytes,
      bodyBudget,
      metrics,
      assets: new AssetServer(state, assetFiles, metrics, (script, request) => tails.assetServed(script, request)),
      workerServed: (script: string, durationMs: number, status: number | null) => tails.served(script, durationMs, status),
      ...readiness,
      log,
    }
    const dataPlane = createDataPlaneServer(routing)
    const serviceBindings = createServiceBindingServer(routing)
    const tailSink = createTailSinkServer(tails, bodyBudget, log)
    const management = createManagementServer({
      service,
      tails: settings.worker_events ? tails : null,
      traces: {
        traceScript: (script) => runtime.traceScript(script),
        readCounts: async () => void (await Promise.all([workerCounts.readAll(servingAgents()), front?.readCounters()])),
      },
      state,
      metrics,
      signatureWindowSeconds: settings.signature_window_seconds,
      maxBodyBytes,
      maxAssetBodyBytes: Math.ceil((settings.max_asset_bytes * 4) / 3) + 64 * 1024,
      assetFiles,
      maxAssetBytes: settings.max_asset_bytes,
      bodyBudget,
      beforeReply: async () => front?.sync(),
      pairingLimiter: new PairingLimiter({maxFailures: settings.pairing_max_failures, windowSeconds: settings.pairing_failure_window_seconds, log}),
      ...readiness,
      log,
    })
    const servers: http.Server[] = [dataPlane, serviceBindings, tailSink, management]
    // The two network listeners; the unix sockets are workerd's alone. Behind the front door, HAProxy holds the clients' connections and their limits.
    const guard: ConnectionGuard = new ConnectionGuard({budget: maxConnections, perAddress: settings.max_connections_per_address}, metrics)
    if (!front)
      guard.watch(dataPlane, 'host.listen', {
        headerTimeoutMs: settings.header_timeout_ms,
        requestTimeoutMs: settings.request_timeout_ms,
        idleTimeoutMs: settings.idle_timeout_ms,
      })
    guard.watch(management, 'host.admin_listen', {
      headerTimeoutMs: settings.admin_header_timeout_ms,
      requestTimeoutMs: settings.admin_request_timeout_ms,
      idleTimeoutMs: settings.admin_idle_timeout_ms,
    })
    const reclaim = new HeapReclaim(() => guard.arrivals, log)
    cleanups.push(() => reclaim.close())
    // Listeners first, so /livez answers (and requests wait) while the shards start.
    if (front) {
      behindFront(dataPlane)
      await listenOnPrivateSocket(dataPlane, front.nodeSocket)
      cleanups.push(() => front!.stop())
    }
    const listenAddress = await listenOrExplain((address) => front?.listen(address) ?? listen(dataPlane, address), settings.listen, 'host.listen')
    cleanups.push(() => closeServer(dataPlane, settings.drain_timeout_ms))
    const adminAddress = await listenOrExplain((address) => listen(management, address), settings.admin_listen, 'host.admin_listen')
    cleanups.push(() => closeServer(management, settings.drain_timeout_ms))
    await listenOnPrivateSocket(serviceBindings, serviceBindingSocketPath(dataDir))
    cleanups.push(() => closeServer(serviceBindings, settings.drain_timeout_ms))
    await listenOnPrivateSocket(tailSink, tailSocketPath(dataDir))
    cleanups.push(() => closeServer(tailSink, settings.drain_timeout_ms))
    cleanups.push(() => tails.close())
    publicUrl = settings.public_url || urlOf(advertisable(listenAddress))
    const adminUrl = urlOf(advertisable(adminAddress))

    await clearSnapshotLeftovers(dataDir)
    await runtime.pruneModuleCache(new Set(state.scripts.all().flatMap((script) => state.scripts.modulesOf(script.name).map((module) => module.sha256))))
    await runtime.start()
    const crons = new CronScheduler({
      state,
      shard: (index) => runtime.shard(index),
      now: options.cronClock ?? Date.now,
      holdTimeoutMs: settings.request_hold_timeout_ms,
      log,
    })
    crons.start()
    cleanups.push(() => crons.stop())

    const info: HostInfo = {
      pid: process.pid,
      dataDir,
      publicUrl,
      adminUrl,
      baseDomain: settings.base_domain,
      front: front ? 'haproxy' : 'node',
      fingerprint: identity.fingerprint,
      scope: identity.scope,
      startedAt: new Date().toISOString(),
    }
    cleanups.push(await writeHostInfo(dataDir, info))
    log.info({publicUrl, adminUrl, dataDir, scope: identity.scope, shards: settings.shards}, 'edge host started')
    setImmediate(parseLoadedSourceMaps)
    let stopping: Promise<void> | null = null
    return {
      dataDir,
      publicUrl,
      adminUrl,
      listen: listenAddress,
      adminListen: adminAddress,
      fingerprint: identity.fingerprint,
      scope: identity.scope,
      front: info.front,
      issuedPairingCode,
      ready: () => runtime.ready(),
      runDueCronTriggers: () => crons.tick(),
      stop: () => {
        stopping ??= (async () => {
          log.info('edge host stopping')
          // Listeners stop accepting and drain first — readiness probes waiting for a swap answer now,
          // live tails end (they would hold the management listener's drain until its timeout) —
          // then the shards, then the state.
          runtime.endWaits()
          tails.close()
          await front?.stop() // the public listener: it lets its requests end, then the Node listeners drain
          await Promise.all(servers.map((server) => closeServer(server, settings.drain_timeout_ms)))
          await cleanUp()
          log.info('edge host stopped')
        })()
        return stopping
      },
    }
  } catch (error) {
    await cleanUp()
    throw error
  }
}

/**
 * The host's pairing code, read from its data dir (the host may be running). `rotate` issues a new
 * one; otherwise a code already used is an error, since a used code cannot pair again.
 */
export function hostPairingCode(dataDir: string, options: {rotate?: boolean} = {}): string {
  if (!existsSync(path.join(dataDir, STATE_FILE))) {
    throw new KitError('not_found', `${dataDir} holds no edge host state; start the host there first (edgeworkers host serve --data-dir ${dataDir})`)
  }
  const state = HostState.open(dataDir)
  try {
    if (options.rotate) return state.pairing.issueCode()
    const code = state.pairing.code()
    if (code === null) throw new KitError('conflict', 'the pairing code was already used; --rotate issues a new one')
    return code
  } finally {
    state.close()
  }
}

/** `bind`: listens on the address (the data plane's or management's server, or the front door). */
async function listenOrExplain(bind: (address: ListenAddress) => Promise<ListenAddress>, address: string, setting: string): Promise<ListenAddress> {
  try {
    return await bind(parseListenAddress(address))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new KitError('config_invalid', `${setting} ${address}: cannot listen (${code ?? (error as Error).message})`)
  }
}

/** A wildcard listener is reached on loopback from this machine. */
function advertisable(address: ListenAddress): ListenAddress {
  if (address.host === '0.0.0.0') return {...address, host: '127.0.0.1'}
  if (address.host === '::') return {...address, host: '::1'}
  return address
}
