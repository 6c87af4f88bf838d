// The management listener: health and metrics, pairing, and the signed /v1 API (see
// ../protocol/management-api.ts). Order of checks for a /v1 call: route → body size → signature
// (nothing is read or written for an unsigned, tampered, stale, replayed or unpaired request) →
// JSON and schema → the operation.
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
  replaceAccessPolicySchema,
  replaceOperationSettingsSchema,
  revisionOnlySchema,
  rotateApiKeySchema,
  runtimeConfigKeySchema,
  uploadScriptSchema,
} from '../protocol/management-api.js'
import {verifyRequest} from '../protocol/signing.js'
import {HostError} from './errors.js'
import {BodyTooLargeError, readBody, sendJson} from './http.js'
import type {HostMetrics} from './metrics.js'
import type {HostService} from './service.js'
import type {HostState} from './state.js'

export interface ManagementServerOptions {
  service: HostService
  state: HostState
  metrics: HostMetrics
  signatureWindowSeconds: number
  /** Largest request body accepted (an upload is base64, so about 4/3 of the module bytes). */
  maxBodyBytes: number
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
    route('POST', '/v1/pair', ({json}) => ok(service.pair(parse(pairRequestSchema, json).code)), false),
    route('GET', '/v1/inventory', () => ok(service.inventory())),
    route('GET', '/v1/scripts', ({query}) => ok(service.list(query.get('limit'), query.get('cursor')))),
    route('PUT', `/v1/scripts/${NAME}`, async ({params, json}) => ok(await service.upload(params.name!, parse(uploadScriptSchema, json)))),
    route('GET', `/v1/scripts/${NAME}`, ({params}) => ok(service.details(params.name!))),
    route('POST', `/v1/scripts/${NAME}/retire`, ({params}) => ok(service.retire(params.name!))),
    route('POST', `/v1/scripts/${NAME}/lockdown`, ({params, json}) => ok(service.lockdown(params.name!, parse(controlMetaBodySchema, json ?? {})))),
    route('GET', `/v1/scripts/${NAME}/access-policy`, ({params, query}) => ok(service.accessPolicy(params.name!, query.get('releaseGeneration')))),
    route('PUT', `/v1/scripts/${NAME}/access-policy`, ({params, json}) =>
      ok(service.replaceAccessPolicy(params.name!, parse(replaceAccessPolicySchema, json))),
    ),
    route('POST', `/v1/scripts/${NAME}/access-policy/api-key/rotate`, ({params, json}) => ok(service.rotateApiKey(params.name!, parse(rotateApiKeySchema, json)))),
    route('POST', `/v1/scripts/${NAME}/access-policy/api-key/revoke`, ({params, json}) => ok(service.revokeApiKey(params.name!, parse(revisionOnlySchema, json)))),
    route('GET', `/v1/scripts/${NAME}/runtime-config`, ({params}) => ok(service.runtimeConfig(params.name!))),
    route('PUT', `/v1/scripts/${NAME}/runtime-config/(?<item>[^/]+)`, ({params, json}) =>
      ok(service.putRuntimeConfig(params.name!, pathParam(runtimeConfigKeySchema, params.item!, 'runtime-config key'), parse(putRuntimeConfigSchema, json))),
    ),
    route('DELETE', `/v1/scripts/${NAME}/runtime-config/(?<item>[^/]+)`, ({params, json}) =>
      ok(service.deleteRuntimeConfig(params.name!, pathParam(runtimeConfigKeySchema, params.item!, 'runtime-config key'), parse(revisionOnlySchema, json))),
    ),
    route('GET', `/v1/scripts/${NAME}/operation-settings`, ({params}) => ok(service.operationSettings(params.name!))),
    route('PUT', `/v1/scripts/${NAME}/operation-settings`, ({params, json}) => ok(service.replaceOperationSettings(params.name!, parse(replaceOperationSettingsSchema, json)))),
    route('POST', `/v1/scripts/${NAME}/operation-settings/revoke`, ({params, json}) => ok(service.revokeOperationSettings(params.name!, parse(revisionOnlySchema, json)))),
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
      ok(service.deleteServiceAccount(params.name!, pathParam(serviceAccountIdSchema, params.item!, 'service account id'), parse(controlMetaBodySchema, json ?? {}))),
    ),
    route('GET', '/v1/receipts/(?<item>[^/]+)', ({params, query}) => ok(service.receipt(pathParam(mutationIdSchema, params.item!, 'mutation id'), query.get('commandDigest')))),
    route('POST', '/v1/receipts/(?<item>[^/]+)/ack', ({params}) => ok(service.acknowledgeReceipt(pathParam(mutationIdSchema, params.item!, 'mutation id')))),
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

    const body = await readBody(request, options.maxBodyBytes)
    if (matched.signed) authenticate(request, method, target, body)
    const params = matched.pattern.exec(url.pathname)!.groups ?? {}
    const result = await matched.handle({params, query: url.searchParams, json: parseJsonBody(request, body)})
    if ('stream' in result) return streamAnswer(response, result, options.log)
    return answer(response, result.status ?? 200, result.body)
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

  return http.createServer((request, response) => {
    const began = performance.now()
    handle(request, response)
      .catch((error: unknown) => answerError(response, error, options.log))
      .then((status) => {
        // Paths and statuses only: bodies (codes, secrets, modules) are never logged. Reads are
        // debug: the kit's readiness gate polls.
        const level = request.method === 'GET' && status < 400 ? 'debug' : 'info'
        options.log[level]({method: request.method, path: request.url?.split('?')[0], status, ms: Math.round(performance.now() - began)}, 'management request')
      })
      .catch(() => {})
  })
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
    // The status line is gone: the caller sees a cut body, which it must treat as a failure.
    log.warn({err: error}, 'streamed answer cut short')
  } finally {
    await result.dispose()
  }
  return 200
}

function answerError(response: http.ServerResponse, error: unknown, log: Logger): number {
  if (error instanceof BodyTooLargeError) {
    sendJson(response, 413, {code: 'request_too_large', message: error.message}, {}, {closeConnection: true})
    return 413
  }
  if (error instanceof HostError) return answer(response, error.status, {code: error.code, message: error.message})
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
    return JSON.parse(body.toString('utf8'))
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

function pathParam(schema: z.ZodType<string>, text: string, what: string): string {
  if (!schema.safeParse(text).success) throw new HostError('invalid_request', `${JSON.stringify(text)} is not a valid ${what}`)
  return text
}
