// The management API's endpoints, in one table: the host routes by it (src/edge-host/http/management-server.ts),
// the kit's provider calls by it (src/provider/onprem/client.ts), and docs/management-api.md lists it
// (`npm run docs:endpoints`; a unit test fails when the two differ). Each entry says the method, the
// path with its parameters, the query parameters, the request and response bodies, and whether the
// call is signed (./signing.ts). Every endpoint answers errors as {code, message} (see errorStatus).
// A table, one entry per endpoint: past the 400-line limit for files on purpose.
import {z} from 'zod'
import {fenceIdSchema, identifierSchema, mutationIdSchema, READINESS_WAIT_MAX_MS, serviceAccountIdSchema} from './api/common.js'
import {
  accessPolicySchema,
  controlMetaBodySchema,
  controlResultSchema,
  deleteResultSchema,
  lockdownSchema,
  operationSettingsSchema,
  purgeSchema,
  putRuntimeConfigSchema,
  putSecretSchema,
  putServiceAccountSchema,
  receiptAckSchema,
  receiptSchema,
  replaceAccessPolicySchema,
  replaceOperationSettingsSchema,
  revisionOnlySchema,
  revokeResultSchema,
  rotateApiKeySchema,
  runtimeConfigEntrySchema,
  runtimeConfigKeySchema,
  runtimeConfigListSchema,
  secretDeletionSchema,
  secretInfoSchema,
  secretListSchema,
  serviceAccountDeletionSchema,
  serviceAccountInfoSchema,
  serviceAccountListSchema,
} from './api/control.js'
import {missingAssetsRequestSchema, missingAssetsSchema, putAssetsResultSchema, putAssetsSchema} from './api/assets.js'
import {beginFenceSchema, fenceSchema, fenceStatusSchema, inventorySchema, readinessSchema} from './api/host.js'
import {identitySchema, pairRequestSchema, pairResponseSchema, scriptDetailsSchema, scriptListSchema, uploadScriptSchema} from './api/scripts.js'
import {tailLineSchema, workerActivitySchema} from './tail.js'

export type HttpMethod = 'GET' | 'PUT' | 'POST' | 'DELETE'

/** What the answer's body is: JSON (the response schema), NDJSON (one response per line), a tar stream, or Prometheus text. */
export type AnswerFormat = 'json' | 'ndjson' | 'tar' | 'prometheus'

export const answerContentTypes: Record<Exclude<AnswerFormat, 'prometheus'>, string> = {
  json: 'application/json',
  ndjson: 'application/x-ndjson',
  tar: 'application/x-tar',
}

export interface Endpoint {
  method: HttpMethod
  /** Parameters are `:name` segments; a value is one path segment, sent as it is (every parameter's alphabet is URL-safe). */
  path: string
  /** Path parameters the host checks before anything else, with the name its error message uses. */
  params?: Readonly<Record<string, {schema: z.ZodType<string>; what: string}>>
  /** Query parameters, in the order the kit writes them. */
  query?: readonly string[]
  /** false: `GET /v1/identity`, `POST /v1/pair` and the health endpoints; everything else is signed. */
  signed: boolean
  /** The JSON body; absent when the endpoint reads none. */
  request?: z.ZodType
  /** The body may be left out, and then counts as `{}` (control calls whose only fields are optional). */
  bodyOptional?: boolean
  response: z.ZodType | null
  answer: AnswerFormat
  /** Health and metrics: answered without reading a body; not versioned. */
  health?: boolean
  /** One line for the endpoint list. */
  summary: string
}

const signed = true
const fenceIdParam = {fenceId: {schema: fenceIdSchema, what: 'fence id'}}
const mutationIdParam = {mutationId: {schema: mutationIdSchema, what: 'mutation id'}}

export const endpoints = {
  livez: {
    method: 'GET',
    path: '/livez',
    signed: false,
    health: true,
    response: z.strictObject({status: z.literal('ok')}),
    answer: 'json',
    summary: 'The process answers (also on the data plane listener).',
  },
  readyz: {
    method: 'GET',
    path: '/readyz',
    signed: false,
    health: true,
    response: readinessSchema,
    answer: 'json',
    summary: 'Every shard serves: 200, else 503 (also on the data plane listener).',
  },
  metrics: {
    method: 'GET',
    path: '/metrics',
    signed: false,
    health: true,
    response: null,
    answer: 'prometheus',
    summary: 'Prometheus metrics of the host and its Workers.',
  },
  identity: {
    method: 'GET',
    path: '/v1/identity',
    signed: false,
    response: identitySchema,
    answer: 'json',
    summary: 'The host key, scope and data-plane address; whether it is paired.',
  },
  pair: {
    method: 'POST',
    path: '/v1/pair',
    signed: false,
    request: pairRequestSchema,
    response: pairResponseSchema,
    answer: 'json',
    summary: 'Exchanges the one-time code for the shared secret, with the host key’s proof.',
  },
  inventory: {
    method: 'GET',
    path: '/v1/inventory',
    signed,
    response: inventorySchema,
    answer: 'json',
    summary: 'Shards, scripts, the active fence, quarantines.',
  },
  listScripts: {
    method: 'GET',
    path: '/v1/scripts',
    query: ['limit', 'cursor'],
    signed,
    response: scriptListSchema,
    answer: 'json',
    summary: 'Scripts sorted by name, a page at a time (limit ≤ 1000).',
  },
  uploadScript: {
    method: 'PUT',
    path: '/v1/scripts/:name',
    signed,
    request: uploadScriptSchema,
    response: scriptDetailsSchema,
    answer: 'json',
    summary:
      'Validated alone first; goes live shortly after (see the readiness probe). `department` (optional): the kit’s department id, the `department` label of the script’s metrics.',
  },
  missingAssets: {
    method: 'POST',
    path: '/v1/assets/missing',
    signed,
    request: missingAssetsRequestSchema,
    response: missingAssetsSchema,
    answer: 'json',
    summary: 'Which of these asset SHA-256s the host does not hold: the kit sends only those before an upload.',
  },
  putAssets: {
    method: 'POST',
    path: '/v1/assets',
    signed,
    request: putAssetsSchema,
    response: putAssetsResultSchema,
    answer: 'json',
    summary: 'Stores asset files by content (each checked against its SHA-256); an upload may then name them.',
  },
  script: {method: 'GET', path: '/v1/scripts/:name', signed, response: scriptDetailsSchema, answer: 'json', summary: 'One script’s details.'},
  retire: {
    method: 'POST',
    path: '/v1/scripts/:name/retire',
    signed,
    response: scriptDetailsSchema,
    answer: 'json',
    summary: 'Permanent and idempotent; also for names the host never had.',
  },
  lockdown: {
    method: 'POST',
    path: '/v1/scripts/:name/lockdown',
    signed,
    request: controlMetaBodySchema,
    bodyOptional: true,
    response: controlResultSchema(lockdownSchema),
    answer: 'json',
    summary: 'The script answers 503 from now on.',
  },
  accessPolicy: {
    method: 'GET',
    path: '/v1/scripts/:name/access-policy',
    query: ['releaseGeneration', 'waitMs'],
    signed,
    response: accessPolicySchema,
    answer: 'json',
    summary:
      'With releaseGeneration, the readiness probe: 200 only while that release is live in a running shard, else 409 script_not_ready; ' +
      `with waitMs ≤ ${READINESS_WAIT_MAX_MS} the host answers as soon as it goes live, once the script holds another release, or after waitMs.`,
  },
  replaceAccessPolicy: {
    method: 'PUT',
    path: '/v1/scripts/:name/access-policy',
    signed,
    request: replaceAccessPolicySchema,
    response: controlResultSchema(accessPolicySchema),
    answer: 'json',
    summary: 'Replaces the policy in front of the script.',
  },
  rotateApiKey: {
    method: 'POST',
    path: '/v1/scripts/:name/access-policy/api-key/rotate',
    signed,
    request: rotateApiKeySchema,
    response: controlResultSchema(accessPolicySchema),
    answer: 'json',
    summary: 'A new API key digest.',
  },
  revokeApiKey: {
    method: 'POST',
    path: '/v1/scripts/:name/access-policy/api-key/revoke',
    signed,
    request: revisionOnlySchema,
    response: revokeResultSchema(accessPolicySchema),
    answer: 'json',
    summary: 'Drops the API key.',
  },
  runtimeConfig: {
    method: 'GET',
    path: '/v1/scripts/:name/runtime-config',
    signed,
    response: runtimeConfigListSchema,
    answer: 'json',
    summary: 'Runtime-config entries (JSON values; not secret).',
  },
  putRuntimeConfig: {
    method: 'PUT',
    path: '/v1/scripts/:name/runtime-config/:key',
    params: {key: {schema: runtimeConfigKeySchema, what: 'runtime-config key'}},
    signed,
    request: putRuntimeConfigSchema,
    response: controlResultSchema(runtimeConfigEntrySchema),
    answer: 'json',
    summary: 'Sets one key.',
  },
  deleteRuntimeConfig: {
    method: 'DELETE',
    path: '/v1/scripts/:name/runtime-config/:key',
    params: {key: {schema: runtimeConfigKeySchema, what: 'runtime-config key'}},
    signed,
    request: revisionOnlySchema,
    response: controlResultSchema(runtimeConfigEntrySchema),
    answer: 'json',
    summary: 'Deletes one key.',
  },
  operationSettings: {
    method: 'GET',
    path: '/v1/scripts/:name/operation-settings',
    signed,
    response: operationSettingsSchema,
    answer: 'json',
    summary: 'The operation settings’ digest, release and revision.',
  },
  replaceOperationSettings: {
    method: 'PUT',
    path: '/v1/scripts/:name/operation-settings',
    signed,
    request: replaceOperationSettingsSchema,
    response: controlResultSchema(operationSettingsSchema),
    answer: 'json',
    summary: 'Replaces the operation settings of the release the script holds.',
  },
  revokeOperationSettings: {
    method: 'POST',
    path: '/v1/scripts/:name/operation-settings/revoke',
    signed,
    request: revisionOnlySchema,
    response: revokeResultSchema(operationSettingsSchema),
    answer: 'json',
    summary: 'Drops the operation settings.',
  },
  secrets: {
    method: 'GET',
    path: '/v1/scripts/:name/secrets',
    signed,
    response: secretListSchema,
    answer: 'json',
    summary: 'Secret names and digests, never values.',
  },
  purgeSecrets: {
    method: 'DELETE',
    path: '/v1/scripts/:name/secrets',
    signed,
    request: controlMetaBodySchema,
    bodyOptional: true,
    response: controlResultSchema(purgeSchema),
    answer: 'json',
    summary: 'Deletes every secret (secrets.purge).',
  },
  putSecret: {
    method: 'PUT',
    path: '/v1/scripts/:name/secrets/:secret',
    params: {secret: {schema: identifierSchema, what: 'secret name'}},
    signed,
    request: putSecretSchema,
    response: controlResultSchema(secretInfoSchema),
    answer: 'json',
    summary: 'Sets one secret.',
  },
  deleteSecret: {
    method: 'DELETE',
    path: '/v1/scripts/:name/secrets/:secret',
    params: {secret: {schema: identifierSchema, what: 'secret name'}},
    signed,
    request: controlMetaBodySchema,
    bodyOptional: true,
    response: deleteResultSchema(secretDeletionSchema),
    answer: 'json',
    summary: 'Deletes one secret.',
  },
  serviceAccounts: {
    method: 'GET',
    path: '/v1/scripts/:name/service-accounts',
    signed,
    response: serviceAccountListSchema,
    answer: 'json',
    summary: 'Service-account usernames and password digests.',
  },
  purgeServiceAccounts: {
    method: 'DELETE',
    path: '/v1/scripts/:name/service-accounts',
    signed,
    request: controlMetaBodySchema,
    bodyOptional: true,
    response: controlResultSchema(purgeSchema),
    answer: 'json',
    summary: 'Deletes every service-account credential.',
  },
  putServiceAccount: {
    method: 'PUT',
    path: '/v1/scripts/:name/service-accounts/:id',
    params: {id: {schema: serviceAccountIdSchema, what: 'service account id'}},
    signed,
    request: putServiceAccountSchema,
    response: controlResultSchema(serviceAccountInfoSchema),
    answer: 'json',
    summary: 'Sets one service account’s credentials.',
  },
  deleteServiceAccount: {
    method: 'DELETE',
    path: '/v1/scripts/:name/service-accounts/:id',
    params: {id: {schema: serviceAccountIdSchema, what: 'service account id'}},
    signed,
    request: controlMetaBodySchema,
    bodyOptional: true,
    response: deleteResultSchema(serviceAccountDeletionSchema),
    answer: 'json',
    summary: 'Deletes one service account’s credentials.',
  },
  receipt: {
    method: 'GET',
    path: '/v1/receipts/:mutationId',
    params: mutationIdParam,
    query: ['commandDigest'],
    signed,
    response: receiptSchema,
    answer: 'json',
    summary: 'The stored result of a control call; 409 mutation_conflict under another commandDigest.',
  },
  receiptAck: {
    method: 'POST',
    path: '/v1/receipts/:mutationId/ack',
    params: mutationIdParam,
    signed,
    response: receiptAckSchema,
    answer: 'json',
    summary: 'The kit recorded the receipt.',
  },
  tail: {
    method: 'GET',
    path: '/v1/scripts/:name/tail',
    signed,
    response: tailLineSchema,
    answer: 'ndjson',
    summary: 'Live: one event per finished invocation, `sampled` notices under volume, blank lines as heartbeats (see src/protocol/tail.ts).',
  },
  workerActivity: {
    method: 'GET',
    path: '/v1/workers/activity',
    signed,
    response: workerActivitySchema,
    answer: 'json',
    summary: 'Errors and p99 per Worker over the recent window.',
  },
  fence: {method: 'GET', path: '/v1/fence', signed, response: fenceStatusSchema, answer: 'json', summary: 'The active fence and the recently lifted ones.'},
  beginFence: {
    method: 'POST',
    path: '/v1/fence',
    signed,
    request: beginFenceSchema,
    response: fenceSchema,
    answer: 'json',
    summary: '201 when begun; the same active id again → 200.',
  },
  fenceById: {method: 'GET', path: '/v1/fence/:fenceId', params: fenceIdParam, signed, response: fenceSchema, answer: 'json', summary: 'One fence.'},
  fenceEnd: {
    method: 'POST',
    path: '/v1/fence/:fenceId/end',
    params: fenceIdParam,
    signed,
    response: fenceSchema,
    answer: 'json',
    summary: 'Idempotent; the answer shows how the fence was lifted.',
  },
  snapshot: {
    method: 'GET',
    path: '/v1/snapshot',
    query: ['fenceId'],
    signed,
    response: null,
    answer: 'tar',
    summary: 'The data dir as a tar stream, only while fenceId is the active fence (else 409 fence_required).',
  },
} as const satisfies Record<string, Endpoint>

export type Endpoints = typeof endpoints
export type EndpointName = keyof Endpoints

type ParamNames<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamNames<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? Name
    : never
/** The path parameters of an endpoint, by name. */
export type PathParams<E extends Endpoint> = {[K in ParamNames<E['path']>]: string}
/** The query parameters of an endpoint; absent or null ones are left out. */
export type QueryParams<E extends Endpoint> = E extends {query: readonly (infer Q extends string)[]}
  ? {[K in Q]?: string | number | null}
  : Record<never, never>
/** What the kit sends: the request schema's input. */
export type RequestBody<E extends Endpoint> = E extends {request: infer S extends z.ZodType} ? z.input<S> : undefined
/** What the host answers (for NDJSON: each line). */
export type ResponseBody<E extends Endpoint> = E['response'] extends z.ZodType ? z.output<E['response']> : never

/** The request target of a call: the path with its parameters, then the query in the table's order. */
export function pathOf<E extends Endpoint>(endpoint: E, params: PathParams<E>, query?: QueryParams<E>): string {
  const values = params as Record<string, string>
  const path = endpoint.path.replace(/:([A-Za-z]+)/g, (_, name: string) => values[name]!)
  const search = new URLSearchParams()
  for (const name of endpoint.query ?? []) {
    const value = (query as Record<string, string | number | null | undefined> | undefined)?.[name]
    if (value !== undefined && value !== null) search.set(name, String(value))
  }
  const text = search.toString()
  return text ? `${path}?${text}` : path
}

/** The path parameters of `pathname` when it matches the endpoint's path, else null. Values are not decoded. */
export function matchPath(endpoint: Endpoint, pathname: string): Record<string, string> | null {
  const pattern = (compiled[endpoint.path] ??= new RegExp(`^${endpoint.path.replace(/:([A-Za-z]+)/g, '(?<$1>[^/]+)')}$`))
  const match = pattern.exec(pathname)
  return match ? {...match.groups} : null
}

const compiled: Record<string, RegExp> = {}
