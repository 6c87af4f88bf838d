// The management listener: health and metrics, pairing, and the signed /v1 API, routed by the
// endpoint table (../../protocol/endpoints.ts) to ./management-routes.ts. Order of checks for a /v1
// call: route → pairing and signature
// headers (timestamp window, format) → body, bounded (./body-limits.ts) → signature over the body
// (nothing is read or written for an unsigned, tampered, stale, replayed or unpaired request) →
// strict JSON and schema → the operation. A peer that is not the kit can make the host hold at
// most one capped body per request, all of them under one shared budget, for a short timeout.
import http from 'node:http'
import {pipeline} from 'node:stream/promises'
import type {Logger} from 'pino'
import type {z} from 'zod'
import {endpoints, type EndpointName} from '../../protocol/endpoints.js'
import {answerContentTypes, matchPath, type Endpoint} from '../../protocol/endpoint.js'
import type {Readiness} from '../../protocol/management-api.js'
import {checkSignatureHeaders, verifyRequest} from '../../protocol/signing.js'
import {parseStrictJson} from '../../util/strict-json.js'
import {BodyTooLargeError, readBoundedBody, type BodyBudget} from './body-limits.js'
import {HostError} from '../errors.js'
import {clientAddress, sendJson} from './common.js'
import {checkedValue, managementHandlers, type Call, type Handler, type JsonReply, type StreamReply, type TextReply} from './management-routes.js'
import {PairingRateLimited, type PairingLimiter} from './pairing-limiter.js'
import type {HostMetrics} from '../metrics.js'
import type {AssetFiles} from '../assets/files.js'
import type {HostService} from '../services/host-service.js'
import type {HostState} from '../state/host-state.js'
import type {KitReadinessState} from '../kit-readiness.js'
import type {TailHub} from '../tail-hub.js'

export interface ManagementServerOptions {
  service: HostService
  /** Workers' events: live tails and the activity summary; null when host.worker_events is off. */
  tails: TailHub | null
  /** A tail's script traced (a swap where its process cannot); the counted Workers' counts and the front door's read (../worker-counts.ts). */
  traces: {traceScript(script: string): Promise<void>; readCounts(): Promise<void>}
  state: HostState
  metrics: HostMetrics
  signatureWindowSeconds: number
  /** Largest signed request body accepted (an upload is base64, so about 4/3 of the module bytes). */
  maxBodyBytes: number
  /** The same for POST /v1/assets: one asset file of host.max_asset_bytes, base64. */
  maxAssetBodyBytes: number
  /** The host's static asset files. */
  assetFiles: AssetFiles
  maxAssetBytes: number
  /** Held request bodies, shared with the data plane. */
  bodyBudget: BodyBudget
  pairingLimiter: PairingLimiter
  /** True when every shard serves and the kit admits the host. */
  ready(): boolean
  readinessDetail(): Readiness
  /** What the kit said of this host since it started (PUT /v1/readiness). */
  kitReadiness: KitReadinessState
  /** Before a signed call is answered: what it changed reaches the front door's tables (../front/front.ts). */
  beforeReply?(): Promise<void>
  log: Logger
}

/** Unsigned calls (identity, pairing) carry a few dozen bytes at most. */
const UNSIGNED_BODY_LIMIT = 4 * 1024

const endpointNames = Object.keys(endpoints) as EndpointName[]

/** The endpoint `method pathname` names, with its path parameters as sent; 404 or 405 when there is none. */
function route(method: string, pathname: string): {name: EndpointName; endpoint: Endpoint; params: Record<string, string>} {
  let pathKnown = false
  for (const name of endpointNames) {
    const endpoint: Endpoint = endpoints[name]
    const params = matchPath(endpoint, pathname)
    if (!params) continue
    if (endpoint.method === method) return {name, endpoint, params}
    pathKnown = true
  }
  if (pathKnown) throw new HostError('method_not_allowed', `${pathname} does not take ${method}`)
  throw new HostError('not_found', `no endpoint ${pathname}`)
}

export function createManagementServer(options: ManagementServerOptions): http.Server {
  const handlers = managementHandlers(options)

  const handle = async (request: http.IncomingMessage, response: http.ServerResponse): Promise<number> => {
    const target = request.url ?? '/'
    const url = new URL(target, 'http://management')
    const method = request.method ?? 'GET'

    const {name, endpoint, params} = route(method, url.pathname)
    const handler = handlers[name] as Handler<Endpoint>
    const query = Object.fromEntries((endpoint.query ?? []).map((key) => [key, url.searchParams.get(key)]))
    const call = {params, query, body: undefined, source: clientAddress(request)} as Call<Endpoint>
    // Health and metrics answer at once: no signature, no body.
    if (endpoint.health) return reply(response, endpoint, await handler(call), options.log)

    if (endpoint.signed) checkHeaders(request)
    const limit = !endpoint.signed
      ? UNSIGNED_BODY_LIMIT
      : name === 'putAssets' || name === 'importScriptData'
        ? options.maxAssetBodyBytes
        : options.maxBodyBytes
    const body = await readBoundedBody(request, response, limit, options.bodyBudget)
    if (endpoint.signed) authenticate(request, method, target, body)
    const json = parseJsonBody(request, body)
    for (const [key, rule] of Object.entries(endpoint.params ?? {})) checkedValue(rule.schema, params[key]!, rule.what)
    const input = endpoint.request && parse(endpoint.request, json ?? (endpoint.bodyOptional ? {} : undefined))
    const result = await handler({...call, body: input} as Call<Endpoint>)
    await options.beforeReply?.()
    return reply(response, endpoint, result, options.log)
  }

  /** Everything about the signature that does not need the body: checked before it is read. */
  const checkHeaders = (request: http.IncomingMessage): void => {
    if (options.state.pairingSecret() === null) throw new HostError('edge_host_unpaired', 'this host is not paired; pair it with `edgeworkers host pair`')
    const verdict = checkSignatureHeaders(request.headers, options.signatureWindowSeconds)
    if (!verdict.ok) throw new HostError(verdict.code, verdict.message)
  }

  const authenticate = (request: http.IncomingMessage, method: string, target: string, body: Buffer): void => {
    const secret = options.state.pairingSecret()
    if (secret === null) throw new HostError('edge_host_unpaired', 'this host is not paired; pair it with `edgeworkers host pair`')
    const verdict = verifyRequest({
      secret,
      method,
      target,
      headers: request.headers,
      body,
      windowSeconds: options.signatureWindowSeconds,
      nonces: options.state.nonces,
    })
    if (!verdict.ok) throw new HostError(verdict.code, verdict.message)
  }

  // Timeouts (set by ./connection-guard.ts) are enforced when the server sweeps its connections:
  // every second, not every 30 s.
  const server = http.createServer({connectionsCheckingInterval: 1_000}, (request, response) => {
    const began = performance.now()
    handle(request, response)
      .catch((error: unknown) => answerError(request, response, error, options.log))
      .then((status) => {
        // Paths and statuses only: bodies (codes, secrets, modules) are never logged. Reads are
        // debug: the kit's readiness gate polls. So are refused pairings: the limiter samples them.
        const path = request.url?.split('?')[0]
        const quiet = (request.method === 'GET' && status < 400) || (path === '/v1/pair' && status >= 400)
        options.log[quiet ? 'debug' : 'info']({method: request.method, path, status, ms: Math.round(performance.now() - began)}, 'management request')
      })
      .catch(() => {})
  })
  return server
}

function answer(response: http.ServerResponse, status: number, body: unknown): number {
  sendJson(response, status, body)
  return status
}

/** Writes a handler's reply as the endpoint's answer format says. */
function reply(response: http.ServerResponse, endpoint: Endpoint, result: JsonReply<unknown> | StreamReply | TextReply, log: Logger): Promise<number> | number {
  if (endpoint.answer === 'json') {
    const {status = 200, body} = result as JsonReply<unknown>
    return answer(response, status, body)
  }
  if (endpoint.answer === 'prometheus') {
    const {contentType, text} = result as TextReply
    response.writeHead(200, {'content-type': contentType})
    response.end(text)
    return 200
  }
  return streamAnswer(response, answerContentTypes[endpoint.answer], result as StreamReply, log)
}

async function streamAnswer(response: http.ServerResponse, contentType: string, result: StreamReply, log: Logger): Promise<number> {
  response.writeHead(200, {'content-type': contentType, 'cache-control': 'no-store'})
  try {
    await pipeline(result.stream, response)
  } catch (error) {
    // The status line is gone: the caller sees a cut body, which it must treat as a failure. A
    // caller that leaves an endless stream (a live tail) is how such a stream ends: not worth a warning.
    const callerLeft = (error as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE'
    log[callerLeft ? 'debug' : 'warn']({err: error}, 'streamed answer cut short')
  } finally {
    await result.dispose()
  }
  return 200
}

function answerError(request: http.IncomingMessage, response: http.ServerResponse, error: unknown, log: Logger): number {
  // A refusal before the body was read leaves it unread: close the connection rather than drain it.
  const closeConnection = !request.complete
  if (error instanceof BodyTooLargeError) {
    sendJson(response, 413, {code: 'request_too_large', message: error.message}, {}, {closeConnection})
    return 413
  }
  if (error instanceof HostError) {
    const headers: Record<string, string> = error instanceof PairingRateLimited ? {'retry-after': String(error.retryAfterSeconds)} : {}
    sendJson(response, error.status, {code: error.code, message: error.message}, headers, {closeConnection})
    return error.status
  }
  log.error({err: error}, 'management request failed')
  return answer(response, 500, {code: 'internal_error', message: 'the host failed to handle the request; see its log'})
}

function parseJsonBody(request: http.IncomingMessage, body: Buffer): unknown {
  if (body.length === 0) return undefined
  const type = request.headers['content-type'] ?? ''
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new HostError('unsupported_media_type', `the body must be application/json, not ${type || 'untyped'}`)
  }
  try {
    return parseStrictJson(body)
  } catch (error) {
    throw new HostError('invalid_json', `the body is not valid JSON: ${(error as Error).message}`)
  }
}

function parse<S extends z.ZodType>(schema: S, json: unknown): z.output<S> {
  if (json === undefined) throw new HostError('invalid_request', 'the request needs a JSON body')
  const result = schema.safeParse(json)
  if (result.success) return result.data
  const issue = result.error.issues[0]!
  const where = issue.path.length > 0 ? issue.path.join('.') : 'body'
  const message = issue.code === 'unrecognized_keys' ? `unknown key ${issue.keys.join(', ')}` : issue.message
  throw new HostError('invalid_request', `${where}: ${message}`)
}
