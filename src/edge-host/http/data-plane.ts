// The public listener: routes each request to its script's shard, by host name
// (`<script>.<base domain>`, any path) or by path (`/<script>/…`, the prefix removed), so the Worker
// sees the same URL either way: http://<script>.<base domain>/<rest>.
//
// Before the script runs: unknown, retired or not-yet-live → 404 worker_not_found (byte-identical
// for all three, so a retired Worker is indistinguishable from one that never existed); locked down
// → 403 worker_retired (on every channel, kit-signed included); handed over to another host of the
// kit → 503 worker_moved; access policy → 403 access_denied
// unless the request is signed by the paired kit. Requests for a shard that is swapping are held
// until it serves again. Bodies stream both ways, never buffered (except a kit-signed request's).
//
// WebSocket upgrades take the same path and the same checks; once workerd answers 101 the two
// connections are spliced and the shard lease is released, so an open socket never holds up a
// swap. When the process serving it is replaced (a deploy to its shard, or a stop) the socket is
// closed — clients see the connection drop (1006) and reconnect to the new release.
//
// The service-binding listener (createServiceBindingServer, a unix socket under the data dir that
// only workerd reaches) routes a Worker's `env.<binding>.fetch()` to the script named by the header
// workerd sets for that binding: same rules, except that the access policy does not apply — the
// binding was granted, within one company, when the caller's deploy was enqueued.
import {createHash, randomUUID, timingSafeEqual} from 'node:crypto'
import http from 'node:http'
import {BlockList, isIPv6, type Socket} from 'node:net'
import type {Duplex} from 'node:stream'
import {setTimeout as sleep} from 'node:timers/promises'
import type {Logger} from 'pino'
import {SCRIPT_NAME_PATTERN} from '../../protocol/management-api.js'
import {checkSignatureHeaders, hasSignatureHeaders, verifyRequest} from '../../protocol/signing.js'
import {BodyTooLargeError, readBoundedBody, type BodyBudget} from './body-limits.js'
import {HostError} from '../errors.js'
import {clientAddress, sendJson} from './common.js'
import {UNKNOWN_SCRIPT_LABEL, type HostMetrics} from '../metrics.js'
import type {WorkerdRuntime} from '../runtime/runtime.js'
import type {Shard} from '../runtime/shard.js'
import {ASSETS_TARGET_PREFIX, SERVICE_CALLER_HEADER, SERVICE_TARGET_HEADER} from '../../workerd/config.js'
import type {AssetServer} from '../assets/serve.js'
import type {AccessPolicyRecord, HostState} from '../state/host-state.js'
import {hasBody, proxy, safeToRetry, tunnel, type UpgradeRequest} from './worker-forwarding.js'
import {splitService} from './version-split.js'
import {scriptOfService} from '../../workerd/script.js'

export interface DataPlaneOptions {
  state: HostState
  runtime: WorkerdRuntime
  baseDomain: string
  holdTimeoutMs: number
  signatureWindowSeconds: number
  /** Kit-signed requests are buffered to check their body digest; larger ones are refused. */
  maxSignedBodyBytes: number
  /** Held request bodies, shared with the management listener. */
  bodyBudget: BodyBudget
  metrics: HostMetrics
  /** Static assets: answered before the Worker runs (../assets/serve.ts). */
  assets: AssetServer
  /** A request forwarded to `script` ended: its wall time, and its status (null: no answer). */
  workerServed(script: string, durationMs: number, status: number | null): void
  ready(): boolean
  readinessDetail(): unknown
  log: Logger
}

/** Tries at reaching a shard whose process died mid-request, and the wait for its exit between them. */
const MAX_ATTEMPTS = 3
const RETRY_WAIT_MS = 1_000

/**
 * Methods a request of which may be sent again when a runaway neighbour's process was killed while
 * workerd was running it (as a proxy retries them on a failed upstream): the neighbour's fault, not its own.
 */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS'])

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** `internal`: a service-binding call (no access policy). */
type Target =
  | {kind: 'script'; script: string; path: string; internal?: boolean; assets?: AssetsCaller}
  | {kind: 'health'; check: 'livez' | 'readyz'}
  | {kind: 'none'}

/** The public listener: routes by Host or path. */
export function createDataPlaneServer(options: DataPlaneOptions): http.Server {
  const baseSuffix = `.${options.baseDomain}`
  return createRoutingServer(options, (request): Target => {
    const url = request.url ?? '/'
    const host = (request.headers.host ?? '').toLowerCase().replace(/:\d+$/, '')
    if (host.endsWith(baseSuffix)) return {kind: 'script', script: host.slice(0, -baseSuffix.length), path: url}
    const [pathname, query] = splitQuery(url)
    if (pathname === '/livez' || pathname === '/readyz') return {kind: 'health', check: pathname === '/livez' ? 'livez' : 'readyz'}
    const match = /^\/([^/]+)(\/.*)?$/.exec(pathname)
    if (!match) return {kind: 'none'}
    return {kind: 'script', script: match[1]!, path: `${match[2] ?? '/'}${query}`}
  })
}

/**
 * The service-binding listener: the target is the script the header names (workerd sets it from the
 * caller's binding; a Worker cannot add a second value unnoticed — Node joins repeats with ", ").
 */
export function createServiceBindingServer(options: DataPlaneOptions): http.Server {
  return createRoutingServer(options, (request): Target => {
    const header = request.headers[SERVICE_TARGET_HEADER]
    // An assets binding names the calling release's own assets: a split release's are its own.
    const assets = typeof header === 'string' && header.startsWith(ASSETS_TARGET_PREFIX) ? {service: header.slice(ASSETS_TARGET_PREFIX.length)} : undefined
    const script = assets ? scriptOfService(assets.service).script : header
    if (typeof script !== 'string' || !SCRIPT_NAME_PATTERN.test(script)) return {kind: 'none'}
    return {kind: 'script', script, path: request.url ?? '/', internal: true, assets}
  })
}

function createRoutingServer(options: DataPlaneOptions, resolve: (request: http.IncomingMessage) => Target): http.Server {
  const {state, runtime, metrics} = options
  const baseSuffix = `.${options.baseDomain}`
  const allowlists = new AllowlistCache()
  /** Spliced WebSocket connections (both ends), closed when the server is shut down. */
  const tunnels = new Set<Duplex>()

  const handle = async (request: http.IncomingMessage, response: http.ServerResponse, requestId: string, upgrade: UpgradeRequest | null): Promise<string> => {
    const target = resolve(request)
    if (target.kind === 'health') {
      if (target.check === 'livez') sendJson(response, 200, {status: 'ok'})
      else sendJson(response, options.ready() ? 200 : 503, options.readinessDetail())
      return UNKNOWN_SCRIPT_LABEL
    }
    if (target.kind === 'none' || !SCRIPT_NAME_PATTERN.test(target.script)) {
      workerNotFound(response, requestId)
      return UNKNOWN_SCRIPT_LABEL
    }
    const {script: name, path} = target
    const route = state.route(name)
    if (route === null || route.retired || route.shard === null) {
      workerNotFound(response, requestId)
      return UNKNOWN_SCRIPT_LABEL
    }
    if (route.lockedDown) {
      sendJson(response, 403, {code: 'worker_retired', message: 'Forbidden'}, {'x-request-id': requestId})
      return name
    }
    if (route.handedOver) {
      // Moved to another host of the kit (docs/many-hosts.md): its data is no longer written here.
      sendJson(response, 503, {code: 'worker_moved', message: 'Worker moved to another edge host', requestId}, {'x-request-id': requestId})
      return name
    }
    if (route.quarantined) {
      sendJson(
        response,
        503,
        {code: 'worker_quarantined', message: 'Worker quarantined after repeated runaway incidents; a new deploy lifts it', requestId},
        {'x-request-id': requestId},
      )
      return name
    }

    // A body is buffered (to check its digest) only when the signature is what lets the request in:
    // the policy refuses it otherwise, the host is paired, and the headers pass every check that
    // needs no body. Anything else streams, whatever headers it carries.
    let body: Buffer | undefined
    let kitSigned = false
    // A service-binding call (internal) was granted by the binding itself.
    const allowed = target.internal || allowedByPolicy(route.policy, request, () => allowlists.of(name, route.policy))
    if (!allowed && mayBeKitSigned(request)) {
      // An upgrade request has no body: its bytes after the head belong to the WebSocket.
      body = upgrade ? Buffer.alloc(0) : await readBoundedBody(request, response, options.maxSignedBodyBytes, options.bodyBudget)
      kitSigned = isKitSigned(request, body)
    }
    if (!allowed && !kitSigned) {
      sendJson(response, 403, {code: 'access_denied', message: 'Forbidden'}, {'x-request-id': requestId})
      return name
    }

    let shard = runtime.shard(route.shard)!
    if (target.assets) {
      // No lease: the calling Worker holds one on this shard already. Mid-swap, the stored release.
      const generation = shard.liveGeneration(target.assets.service) ?? storedGeneration(state, target.assets.service)
      await options.assets.serveBinding(name, generation, path, request, response, requestId)
      return name
    }
    // Under a gradual deployment, the release this request goes to (workerd's name for it).
    const service = route.split ? splitService(name, {...route, split: route.split}, request.headers) : name
    const forwardBody = upgrade ? undefined : (body ?? (hasBody(request) ? request : undefined))
    // Sent again if its process is killed as a runaway another Worker caused (it cannot be the cause).
    const replayable = forwardBody === undefined && IDEMPOTENT.has(request.method ?? 'GET')
    const deadline = Date.now() + options.holdTimeoutMs
    for (let attempt = 1; ; attempt++) {
      let failed = false
      const lease = await shard.acquire(Math.max(0, deadline - Date.now()), service)
      if (!lease) {
        sendJson(response, 503, {code: 'worker_unavailable', message: 'Worker unavailable'}, {'x-request-id': requestId})
        return name
      }
      try {
        // Uploaded but its shard has not picked it up yet: not served, so not found.
        const route = await loadedRoute(shard, service)
        if (route === undefined) {
          // Moved to a shard of its own while held (an incident it caused): go there.
          const moved = state.route(name)?.shard
          const own = moved === null || moved === undefined || moved === shard.index ? undefined : runtime.shard(moved)
          if (own && attempt < MAX_ATTEMPTS) {
            shard = own
            continue
          }
          workerNotFound(response, requestId)
          return name
        }
        // A static asset is answered from the release this request goes to (its shard serves it), without running the Worker.
        if (!upgrade && (await options.assets.serve(name, shard.liveGeneration(service), path, request, response, requestId))) return name
        const forward = {...route, path, host: `${name}${baseSuffix}`, requestId, body: forwardBody}
        if (target.internal) countServiceCall(request)
        // The Worker's wall time, as the host sees it: from forwarding to the last byte (or the 101).
        const started = performance.now()
        try {
          if (upgrade) await tunnel(request, response, upgrade, {...forward, socketPath: lease.socketPathOf(route)}, lease, tunnels)
          else await proxy(lease.dispatcher, request, response, forward, replayable ? lease.abandonable : undefined)
        } catch (error) {
          if (response.headersSent || !safeToRetry(error, forwardBody)) options.workerServed(name, performance.now() - started, null)
          throw error
        }
        options.workerServed(name, performance.now() - started, response.statusCode)
        return name
      } catch (error) {
        failed = true
        // A workerd that died under us: wait for the shard to restart and try again, if that is safe.
        const replay = safeToRetry(error, forwardBody) || (lease.replayable() && replayable)
        if (attempt >= MAX_ATTEMPTS || response.headersSent || !replay) throw error
        options.log.warn({script: name, attempt, code: (error as {code?: string}).code}, 'shard connection failed; retrying after it restarts')
        // Replaced (the gate holds the retry until the replacement serves) or dead (it restarts).
        await Promise.race([lease.retired, lease.exited, sleep(RETRY_WAIT_MS)])
      } finally {
        lease.release(failed)
      }
    }
  }

  /**
   * Where the shard's process serves `name`, once it holds the load the route names. A release
   * replaced while its load waited (its modules are gone from the host state, so it can no longer
   * load) is left for the route that replaced it.
   */
  const loadedRoute = async (shard: Shard, name: string) => {
    let route = shard.routeOf(name)
    for (;;) {
      const loading = route?.loadId == null ? undefined : shard.loadPending(route.loadId)
      if (!loading) return route
      await loading
      const now = shard.routeOf(name)
      if (now === undefined || now.loadId === route!.loadId) return route
      route = now
    }
  }

  // A service-binding call is a subrequest of the Worker whose binding made it (workerd names it).
  const countServiceCall = (request: http.IncomingMessage) => {
    const header = request.headers[SERVICE_CALLER_HEADER]
    // A split release calls as its Worker.
    const caller = typeof header === 'string' ? scriptOfService(header).script : undefined
    if (caller !== undefined && SCRIPT_NAME_PATTERN.test(caller) && state.route(caller) !== null)
      metrics.workerSubrequests.inc({script: caller, kind: 'service_binding'})
  }

  const mayBeKitSigned = (request: http.IncomingMessage): boolean =>
    hasSignatureHeaders(request.headers) && state.pairingSecret() !== null && checkSignatureHeaders(request.headers, options.signatureWindowSeconds).ok

  const isKitSigned = (request: http.IncomingMessage, body: Buffer): boolean => {
    const secret = state.pairingSecret()
    if (secret === null) return false
    return verifyRequest({
      secret,
      method: request.method ?? 'GET',
      target: request.url ?? '/',
      headers: request.headers,
      body,
      windowSeconds: options.signatureWindowSeconds,
      nonces: state.nonces,
    }).ok
  }

  const serve = (request: http.IncomingMessage, response: http.ServerResponse, upgrade: UpgradeRequest | null) => {
    const inbound = request.headers['x-request-id']
    const requestId = typeof inbound === 'string' && UUID_PATTERN.test(inbound) ? inbound : randomUUID()
    handle(request, response, requestId, upgrade)
      .then((script) => metrics.requests.inc({script, status: String(response.statusCode)}))
      .catch((error: unknown) => {
        if (error instanceof BodyTooLargeError) {
          sendJson(response, 413, {code: 'request_too_large', message: error.message}, {'x-request-id': requestId}, {closeConnection: true})
        } else if (error instanceof HostError) {
          sendJson(response, error.status, {code: error.code, message: error.message}, {'x-request-id': requestId}, {closeConnection: true})
        } else if (!response.headersSent) {
          options.log.warn({err: error, requestId}, 'data-plane request failed')
          sendJson(response, 502, {code: 'worker_unavailable', message: 'Worker unavailable'}, {'x-request-id': requestId})
        } else {
          response.destroy()
        }
        metrics.requests.inc({script: UNKNOWN_SCRIPT_LABEL, status: String(response.statusCode)})
      })
  }

  // Timeouts (set by ./connection-guard.ts on the public listener) are enforced when the server
  // sweeps its connections: every second, not every 30 s.
  const server = http.createServer({connectionsCheckingInterval: 1_000}, (request, response) => serve(request, response, null))
  server.on('upgrade', (request: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    // Every answer but a 101 is an ordinary response on this connection, which then closes.
    const response = new http.ServerResponse(request)
    response.assignSocket(socket as Socket)
    response.shouldKeepAlive = false
    response.once('finish', () => socket.end())
    socket.on('error', () => socket.destroy())
    serve(request, response, {socket, head})
  })
  // Upgraded connections are no longer the HTTP server's: closing all connections must reach them too.
  const closeAllConnections = server.closeAllConnections.bind(server)
  server.closeAllConnections = () => {
    closeAllConnections()
    for (const socket of tunnels) socket.destroy()
  }
  return server
}

/** The calling release of an assets binding: its workerd service name (the script's, or its split release's). */
interface AssetsCaller {
  service: string
}

/** The stored release generation a workerd service name runs (a split release's, or the script's current one). */
function storedGeneration(state: HostState, service: string): string | null {
  const {script, split} = scriptOfService(service)
  return (split ? state.scripts.splits.get(script)?.releaseGeneration : state.scripts.get(script)?.releaseGeneration) ?? null
}

/** The answer for every script the data plane does not serve — byte-exact by contract. */
function workerNotFound(response: http.ServerResponse, requestId: string): void {
  sendJson(response, 404, {code: 'worker_not_found', message: 'Worker not found', requestId}, {'x-request-id': requestId})
}

function splitQuery(url: string): [string, string] {
  const index = url.indexOf('?')
  return index === -1 ? [url, ''] : [url.slice(0, index), url.slice(index)]
}

function allowedByPolicy(policy: AccessPolicyRecord, request: http.IncomingMessage, allowlist: () => BlockList): boolean {
  switch (policy.mode) {
    case 'public':
      return true
    case 'api_key': {
      const key = presentedApiKey(request)
      if (key === null || policy.apiKeySha256 === null) return false
      return timingSafeEqual(createHash('sha256').update(key).digest(), Buffer.from(policy.apiKeySha256, 'hex'))
    }
    case 'teamsync_internal': {
      const address = clientAddress(request)
      return address !== '' && allowlist().check(address, isIPv6(address) ? 'ipv6' : 'ipv4')
    }
  }
}

/** `x-api-key: <key>` or `authorization: Bearer <key>`. */
function presentedApiKey(request: http.IncomingMessage): string | null {
  const header = request.headers['x-api-key']
  if (typeof header === 'string' && header !== '') return header
  const bearer = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '')
  return bearer ? bearer[1]! : null
}

/** Compiled IP allowlists, per script and policy revision. */
class AllowlistCache {
  private readonly lists = new Map<string, BlockList>()
  private static readonly LIMIT = 10_000

  of(script: string, policy: AccessPolicyRecord): BlockList {
    const key = `${script}@${policy.revision}`
    let list = this.lists.get(key)
    if (!list) {
      if (this.lists.size >= AllowlistCache.LIMIT) this.lists.clear()
      list = new BlockList()
      for (const entry of policy.ipAllowlist) {
        const [address, prefix] = entry.split('/') as [string, string | undefined]
        const family = isIPv6(address) ? 'ipv6' : 'ipv4'
        if (prefix === undefined) list.addAddress(address, family)
        else list.addSubnet(address, Number(prefix), family)
      }
      this.lists.set(key, list)
    }
    return list
  }
}
