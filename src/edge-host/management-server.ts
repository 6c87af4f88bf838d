// The management listener: health and metrics, pairing, and the signed /v1 API (see
// ../protocol/management-api.ts). Order of checks for a /v1 call: route → pairing and signature
// headers (timestamp window, format) → body, bounded (./body-limits.ts) → signature over the body
// (nothing is read or written for an unsigned, tampered, stale, replayed or unpaired request) →
// strict JSON and schema → the operation. A peer that is not the kit can make the host hold at
// most one capped body per request, all of them under one shared budget, for a short timeout.
import http from 'node:http'
import type {Readable} from 'node:stream'
import {pipeline} from 'node:stream/promises'
import type {Logger} from 'pino'
import type {z} from 'zod'
import {
  beginFenceSchema,
  controlMetaBodySchema,
  fenceIdSchema,
  identifierSchema,
  mutationIdSchema,
  serviceAccountIdSchema,
  pairRequestSchema,
  putRuntimeConfigSchema,
  putSecretSchema,
  putServiceAccountSchema,
  READINESS_WAIT_MAX_MS,
  replaceAccessPolicySchema,
  replaceOperationSettingsSchema,
  revisionOnlySchema,
  rotateApiKeySchema,
  runtimeConfigKeySchema,
  uploadScriptSchema,
} from '../protocol/management-api.js'
import {checkSignatureHeaders, verifyRequest} from '../protocol/signing.js'
import {parseStrictJson} from '../util/strict-json.js'
import {BodyTooLargeError, readBoundedBody, type BodyBudget} from './body-limits.js'
import {HostError} from './errors.js'
import {clientAddress, sendJson} from './http.js'
import {PairingRateLimited, type PairingLimiter} from './pairing-limiter.js'
import type {HostMetrics} from './metrics.js'
import type {HostService} from './service.js'
import type {HostState} from './state.js'
import type {TailHub} from './tail-hub.js'

export interface ManagementServerOptions {
  service: HostService
  /** Workers' events: live tails and the activity summary; null when host.worker_events is off. */
  tails: TailHub | null
  state: HostState
  metrics: HostMetrics
  signatureWindowSeconds: number
  /** Largest signed request body accepted (an upload is base64, so about 4/3 of the module bytes). */
  maxBodyBytes: number
  /** Held request bodies, shared with the data plane. */
  bodyBudget: BodyBudget
  pairingLimiter: PairingLimiter
  /** How long a client may take to send its headers, and its whole request. */
  headerTimeoutMs: number
  requestTimeoutMs: number
  /** True when every shard serves. */
  ready(): boolean
  readinessDetail(): unknown
  log: Logger
}

interface CallContext {
  params: Record<string, string>
  query: URLSearchParams
  /** The parsed JSON body, or undefined when the request had none. */
  json: unknown
  /** The peer's address. */
  source: string
}

interface Route {
  method: string
  pattern: RegExp
  signed: boolean
  handle(context: CallContext): Promise<Answer> | Answer
}

type Answer = {status?: number; body: unknown} | StreamAnswer

/** A non-JSON body streamed to the caller; `dispose` runs once it ended or the caller went away. */
interface StreamAnswer {
  stream: Readable
  contentType: string
  dispose(): Promise<void>
}

const NAME = '(?<name>[^/]+)'
/** Unsigned calls (identity, pairing) carry a few dozen bytes at most. */
const UNSIGNED_BODY_LIMIT = 4 * 1024

export function createManagementServer(options: ManagementServerOptions): http.Server {
  const {service} = options
  const route = (method: string, path: string, handle: Route['handle'], signed = true): Route => ({
    method,
    pattern: new RegExp(`^${path}$`),
    signed,
    handle,
  })
  const ok = (body: unknown): Answer => ({body})

  const routes: Route[] = [
    route('GET', '/v1/identity', () => ok(service.identity()), false),
    route('POST', '/v1/pair', ({json, source}) => ok(pair(parse(pairRequestSchema, json).code, source)), false),
    route('GET', '/v1/inventory', () => ok(service.inventory())),
    route('GET', '/v1/scripts', ({query}) => ok(service.list(query.get('limit'), query.get('cursor')))),
    route('PUT', `/v1/scripts/${NAME}`, async ({params, json}) => ok(await service.upload(params.name!, parse(uploadScriptSchema, json)))),
    route('GET', `/v1/scripts/${NAME}`, ({params}) => ok(service.details(params.name!))),
    route('POST', `/v1/scripts/${NAME}/retire`, ({params}) => ok(service.retire(params.name!))),
    route('POST', `/v1/scripts/${NAME}/lockdown`, ({params, json}) => ok(service.lockdown(params.name!, parse(controlMetaBodySchema, json ?? {})))),
    route('GET', `/v1/scripts/${NAME}/access-policy`, async ({params, query}) => {
      const releaseGeneration = query.get('releaseGeneration')
      const waitMs = readinessWaitMs(query.get('waitMs'))
      return ok(
        releaseGeneration !== null && waitMs > 0
          ? await service.awaitLive(params.name!, releaseGeneration, waitMs)
          : service.accessPolicy(params.name!, releaseGeneration),
      )
    }),
    route('PUT', `/v1/scripts/${NAME}/access-policy`, ({params, json}) =>
      ok(service.replaceAccessPolicy(params.name!, parse(replaceAccessPolicySchema, json))),
    ),
    route('POST', `/v1/scripts/${NAME}/access-policy/api-key/rotate`, ({params, json}) =>
      ok(service.rotateApiKey(params.name!, parse(rotateApiKeySchema, json))),
    ),
    route('POST', `/v1/scripts/${NAME}/access-policy/api-key/revoke`, ({params, json}) =>
      ok(service.revokeApiKey(params.name!, parse(revisionOnlySchema, json))),
    ),
    route('GET', `/v1/scripts/${NAME}/runtime-config`, ({params}) => ok(service.runtimeConfig(params.name!))),
    route('PUT', `/v1/scripts/${NAME}/runtime-config/(?<item>[^/]+)`, ({params, json}) =>
      ok(service.putRuntimeConfig(params.name!, pathParam(runtimeConfigKeySchema, params.item!, 'runtime-config key'), parse(putRuntimeConfigSchema, json))),
    ),
    route('DELETE', `/v1/scripts/${NAME}/runtime-config/(?<item>[^/]+)`, ({params, json}) =>
      ok(service.deleteRuntimeConfig(params.name!, pathParam(runtimeConfigKeySchema, params.item!, 'runtime-config key'), parse(revisionOnlySchema, json))),
    ),
    route('GET', `/v1/scripts/${NAME}/operation-settings`, ({params}) => ok(service.operationSettings(params.name!))),
    route('PUT', `/v1/scripts/${NAME}/operation-settings`, ({params, json}) =>
      ok(service.replaceOperationSettings(params.name!, parse(replaceOperationSettingsSchema, json))),
    ),
    route('POST', `/v1/scripts/${NAME}/operation-settings/revoke`, ({params, json}) =>
      ok(service.revokeOperationSettings(params.name!, parse(revisionOnlySchema, json))),
    ),
    route('GET', `/v1/scripts/${NAME}/secrets`, ({params}) => ok(service.secrets(params.name!))),
    route('DELETE', `/v1/scripts/${NAME}/secrets`, ({params, json}) => ok(service.purgeSecrets(params.name!, parse(controlMetaBodySchema, json ?? {})))),
    route('PUT', `/v1/scripts/${NAME}/secrets/(?<item>[^/]+)`, ({params, json}) =>
      ok(service.putSecret(params.name!, pathParam(identifierSchema, params.item!, 'secret name'), parse(putSecretSchema, json))),
    ),
    route('DELETE', `/v1/scripts/${NAME}/secrets/(?<item>[^/]+)`, ({params, json}) =>
      ok(service.deleteSecret(params.name!, pathParam(identifierSchema, params.item!, 'secret name'), parse(controlMetaBodySchema, json ?? {}))),
    ),
    route('GET', `/v1/scripts/${NAME}/service-accounts`, ({params}) => ok(service.serviceAccounts(params.name!))),
    route('DELETE', `/v1/scripts/${NAME}/service-accounts`, ({params, json}) =>
      ok(service.purgeServiceAccounts(params.name!, parse(controlMetaBodySchema, json ?? {}))),
    ),
    route('PUT', `/v1/scripts/${NAME}/service-accounts/(?<item>[^/]+)`, ({params, json}) =>
      ok(service.putServiceAccount(params.name!, pathParam(serviceAccountIdSchema, params.item!, 'service account id'), parse(putServiceAccountSchema, json))),
    ),
    route('DELETE', `/v1/scripts/${NAME}/service-accounts/(?<item>[^/]+)`, ({params, json}) =>
      ok(
        service.deleteServiceAccount(
          params.name!,
          pathParam(serviceAccountIdSchema, params.item!, 'service account id'),
          parse(controlMetaBodySchema, json ?? {}),
        ),
      ),
    ),
    route('GET', '/v1/receipts/(?<item>[^/]+)', ({params, query}) =>
      ok(service.receipt(pathParam(mutationIdSchema, params.item!, 'mutation id'), query.get('commandDigest'))),
    ),
    route('POST', '/v1/receipts/(?<item>[^/]+)/ack', ({params}) => ok(service.acknowledgeReceipt(pathParam(mutationIdSchema, params.item!, 'mutation id')))),
    route('GET', `/v1/scripts/${NAME}/tail`, ({params}) => {
      service.details(params.name!) // script_not_found for a name the host never had
      return {...workerEvents().subscribe(params.name!), contentType: 'application/x-ndjson'}
    }),
    route('GET', '/v1/workers/activity', () => ok(workerEvents().activity())),
    route('GET', '/v1/fence', () => ok(service.fenceStatus())),
    route('POST', '/v1/fence', ({json}) => {
      const {fence, created} = service.beginFence(parse(beginFenceSchema, json))
      return {status: created ? 201 : 200, body: fence}
    }),
    route('GET', '/v1/fence/(?<item>[^/]+)', ({params}) => ok(service.fence(pathParam(fenceIdSchema, params.item!, 'fence id')))),
    route('POST', '/v1/fence/(?<item>[^/]+)/end', ({params}) => ok(service.endFence(pathParam(fenceIdSchema, params.item!, 'fence id')))),
    route('GET', '/v1/snapshot', async ({query}) => {
      const {stream, dispose} = await service.snapshot(pathParam(fenceIdSchema, query.get('fenceId') ?? '', 'fence id'))
      return {stream, dispose, contentType: 'application/x-tar'}
    }),
  ]

  const workerEvents = (): TailHub => {
    if (!options.tails) throw new HostError('worker_events_off', 'this host collects no Worker events (host.worker_events is false)')
    return options.tails
  }

  /** Pairing, refused for a while to a source that keeps sending wrong codes. */
  const pair = (code: string, source: string) => {
    const retryAfter = options.pairingLimiter.retryAfterSeconds(source)
    if (retryAfter > 0) throw new PairingRateLimited(retryAfter)
    try {
      return service.pair(code)
    } catch (error) {
      if (error instanceof HostError && error.code === 'pairing_code_invalid') options.pairingLimiter.recordFailure(source)
      throw error
    }
  }

  const handle = async (request: http.IncomingMessage, response: http.ServerResponse): Promise<number> => {
    const target = request.url ?? '/'
    const url = new URL(target, 'http://management')
    const method = request.method ?? 'GET'

    if (method === 'GET' && url.pathname === '/livez') return answer(response, 200, {status: 'ok'})
    if (method === 'GET' && url.pathname === '/readyz') return answer(response, options.ready() ? 200 : 503, options.readinessDetail())
    if (method === 'GET' && url.pathname === '/metrics') {
      const text = await options.metrics.registry.metrics()
      response.writeHead(200, {'content-type': options.metrics.registry.contentType})
      response.end(text)
      return 200
    }

    const matches = routes.filter((candidate) => candidate.pattern.test(url.pathname))
    if (matches.length === 0) throw new HostError('not_found', `no endpoint ${url.pathname}`)
    const matched = matches.find((candidate) => candidate.method === method)
    if (!matched) throw new HostError('method_not_allowed', `${url.pathname} does not take ${method}`)

    if (matched.signed) checkHeaders(request)
    const body = await readBoundedBody(request, response, matched.signed ? options.maxBodyBytes : UNSIGNED_BODY_LIMIT, options.bodyBudget)
    if (matched.signed) authenticate(request, method, target, body)
    const params = matched.pattern.exec(url.pathname)!.groups ?? {}
    const result = await matched.handle({params, query: url.searchParams, json: parseJsonBody(request, body), source: clientAddress(request)})
    if ('stream' in result) return streamAnswer(response, result, options.log)
    return answer(response, result.status ?? 200, result.body)
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

  // Timeouts are enforced when the server sweeps its connections: every second, not every 30 s.
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
  // A peer that trickles its headers or body holds a connection (and its bytes) only this long.
  server.headersTimeout = options.headerTimeoutMs
  server.requestTimeout = options.requestTimeoutMs
  return server
}

function answer(response: http.ServerResponse, status: number, body: unknown): number {
  sendJson(response, status, body)
  return status
}

async function streamAnswer(response: http.ServerResponse, result: StreamAnswer, log: Logger): Promise<number> {
  response.writeHead(200, {'content-type': result.contentType, 'cache-control': 'no-store'})
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

/** The readiness probe's `waitMs`: absent is 0 (answer at once). */
function readinessWaitMs(text: string | null): number {
  if (text === null) return 0
  const waitMs = Number(text)
  if (!/^\d+$/.test(text) || waitMs > READINESS_WAIT_MAX_MS)
    throw new HostError('invalid_request', `waitMs must be a whole number of milliseconds up to ${READINESS_WAIT_MAX_MS}, not ${JSON.stringify(text)}`)
  return waitMs
}

function pathParam(schema: z.ZodType<string>, text: string, what: string): string {
  if (!schema.safeParse(text).success) throw new HostError('invalid_request', `${JSON.stringify(text)} is not a valid ${what}`)
  return text
}
