// The edge host's management API, version 1: paths, request and response bodies, error codes.
// Shared by the host (src/edge-host) and the kit's on-prem provider (src/provider). Bodies are JSON
// (`content-type: application/json`); every request except `POST /v1/pair` and `GET /v1/identity`
// is signed as ./signing.ts describes. Timestamps on the wire are ISO 8601 strings (UTC).
//
// Endpoints (all answer errors as {code, message}; see `errorStatus`):
//
//   GET    /v1/identity                              → Identity            (unsigned)
//   POST   /v1/pair                 PairRequest      → PairResponse        (unsigned; one-time code)
//   GET    /v1/inventory                             → Inventory
//   GET    /v1/scripts?limit=&cursor=                → ScriptList          (sorted by name; limit ≤ 1000)
//   PUT    /v1/scripts/:name        UploadScript     → ScriptDetails       (validated alone first; goes live
//                                                                           shortly after — see the probe)
//   GET    /v1/scripts/:name                         → ScriptDetails
//   POST   /v1/scripts/:name/retire                  → ScriptDetails       (permanent, idempotent; also for
//                                                                           names the host never had)
//   POST   /v1/scripts/:name/lockdown  ControlMeta?  → ControlResult<Lockdown>
//   GET    /v1/scripts/:name/access-policy[?releaseGeneration=G[&waitMs=W]]
//                                                    → AccessPolicy        (with G: the readiness probe —
//                                                                           200 only while G is live in a running
//                                                                           shard, else 409 script_not_ready; with
//                                                                           W ≤ READINESS_WAIT_MAX_MS the host answers
//                                                                           as soon as G goes live, or once the script
//                                                                           holds another release, or after W ms)
//   PUT    /v1/scripts/:name/access-policy  ReplaceAccessPolicy → ControlResult<AccessPolicy>
//   POST   /v1/scripts/:name/access-policy/api-key/rotate  RotateApiKey → ControlResult<AccessPolicy>
//   POST   /v1/scripts/:name/access-policy/api-key/revoke  RevisionOnly → RevokeResult<AccessPolicy>
//   GET    /v1/scripts/:name/runtime-config          → RuntimeConfigList   (JSON values; not secret)
//   PUT    /v1/scripts/:name/runtime-config/:key  PutRuntimeConfig → ControlResult<RuntimeConfigEntry>
//   DELETE /v1/scripts/:name/runtime-config/:key  RevisionOnly     → ControlResult<RuntimeConfigEntry>
//   GET    /v1/scripts/:name/operation-settings      → OperationSettings
//   PUT    /v1/scripts/:name/operation-settings  ReplaceOperationSettings → ControlResult<OperationSettings>
//   POST   /v1/scripts/:name/operation-settings/revoke  RevisionOnly   → RevokeResult<OperationSettings>
//   GET    /v1/scripts/:name/secrets                 → SecretList          (names and digests, never values)
//   PUT    /v1/scripts/:name/secrets/:secret  PutSecret        → ControlResult<SecretInfo>
//   DELETE /v1/scripts/:name/secrets/:secret  ControlMeta?     → DeleteResult<SecretDeletion>
//   DELETE /v1/scripts/:name/secrets          ControlMeta?     → ControlResult<Purge>      (secrets.purge)
//   GET    /v1/scripts/:name/service-accounts        → ServiceAccountList
//   PUT    /v1/scripts/:name/service-accounts/:id  PutServiceAccount → ControlResult<ServiceAccountInfo>
//   DELETE /v1/scripts/:name/service-accounts/:id  ControlMeta?      → DeleteResult<ServiceAccountDeletion>
//   DELETE /v1/scripts/:name/service-accounts       ControlMeta?     → ControlResult<Purge>
//   GET    /v1/receipts/:mutationId?commandDigest=D  → Receipt
//   POST   /v1/receipts/:mutationId/ack              → {acknowledged: true}
//   GET    /v1/scripts/:name/tail                    → application/x-ndjson (live: one TailEvent per line, blank
//                                                                           lines as heartbeats; see ./tail.ts)
//   GET    /v1/workers/activity                      → WorkerActivity      (errors and p99 per Worker, recent window)
//   GET    /v1/fence                                 → FenceStatus
//   POST   /v1/fence                BeginFence       → Fence               (201; same id again → 200)
//   GET    /v1/fence/:fenceId                        → Fence
//   POST   /v1/fence/:fenceId/end                    → Fence               (idempotent; shows how it was lifted)
//   GET    /v1/snapshot?fenceId=F                    → application/x-tar   (only while F is the active fence,
//                                                                           else 409 fence_required; see
//                                                                           "Data snapshot" below)
//   GET    /livez, /readyz (both listeners), /metrics (management listener)   unsigned, not versioned
//
// While a fence is active every mutating call except ending the fence answers 423 edge_host_fenced
// and changes nothing. Control calls (lockdown, access policy, secrets, service accounts) may carry
// `mutationId` + `commandDigest`: the host then stores the result as a receipt in the same
// transaction, and a repeat of the same mutation returns that receipt's result without applying it
// again (a different digest under the same id → 409 mutation_conflict).
import {z} from 'zod'

export const API_VERSION = 'v1'

/** The longest a readiness probe may wait for its release to go live (`waitMs`): well under any proxy's idle timeout. */
export const READINESS_WAIT_MAX_MS = 25_000

const encode = encodeURIComponent

export const paths = {
  livez: '/livez',
  readyz: '/readyz',
  metrics: '/metrics',
  identity: '/v1/identity',
  pair: '/v1/pair',
  inventory: '/v1/inventory',
  scripts: '/v1/scripts',
  listScripts: (page: {limit?: number; cursor?: string | null} = {}) => {
    const query = new URLSearchParams()
    if (page.limit !== undefined) query.set('limit', String(page.limit))
    if (page.cursor) query.set('cursor', page.cursor)
    const text = query.toString()
    return text ? `/v1/scripts?${text}` : '/v1/scripts'
  },
  script: (name: string) => `/v1/scripts/${name}`,
  retire: (name: string) => `/v1/scripts/${name}/retire`,
  lockdown: (name: string) => `/v1/scripts/${name}/lockdown`,
  accessPolicy: (name: string) => `/v1/scripts/${name}/access-policy`,
  readinessProbe: (name: string, releaseGeneration: string, waitMs = 0) =>
    `/v1/scripts/${name}/access-policy?releaseGeneration=${encode(releaseGeneration)}${waitMs > 0 ? `&waitMs=${waitMs}` : ''}`,
  secrets: (name: string) => `/v1/scripts/${name}/secrets`,
  secret: (name: string, secretName: string) => `/v1/scripts/${name}/secrets/${secretName}`,
  serviceAccounts: (name: string) => `/v1/scripts/${name}/service-accounts`,
  serviceAccount: (name: string, serviceAccountId: string) => `/v1/scripts/${name}/service-accounts/${serviceAccountId}`,
  apiKeyRotate: (name: string) => `/v1/scripts/${name}/access-policy/api-key/rotate`,
  apiKeyRevoke: (name: string) => `/v1/scripts/${name}/access-policy/api-key/revoke`,
  runtimeConfig: (name: string) => `/v1/scripts/${name}/runtime-config`,
  runtimeConfigEntry: (name: string, key: string) => `/v1/scripts/${name}/runtime-config/${key}`,
  operationSettings: (name: string) => `/v1/scripts/${name}/operation-settings`,
  operationSettingsRevoke: (name: string) => `/v1/scripts/${name}/operation-settings/revoke`,
  receipt: (mutationId: string, commandDigest: string) => `/v1/receipts/${mutationId}?commandDigest=${commandDigest}`,
  receiptAck: (mutationId: string) => `/v1/receipts/${mutationId}/ack`,
  fence: '/v1/fence',
  fenceById: (fenceId: string) => `/v1/fence/${fenceId}`,
  fenceEnd: (fenceId: string) => `/v1/fence/${fenceId}/end`,
  snapshot: (fenceId: string) => `/v1/snapshot?fenceId=${encode(fenceId)}`,
  tail: (name: string) => `/v1/scripts/${name}/tail`,
  workerActivity: '/v1/workers/activity',
} as const

// ── Errors ──────────────────────────────────────────────────────────────────────────────────────

/** Every error code the management API answers, with its HTTP status. */
export const errorStatus = {
  invalid_json: 400, // the body is not JSON (or not `application/json`)
  invalid_request: 400, // the JSON does not match the schema; the message names the field
  invalid_script_name: 400, // not ^dw-[0-9a-f]{48}$
  pairing_code_invalid: 401, // unknown, already used or rotated code
  edge_host_unpaired: 401, // signed call to a host nobody paired with
  signature_missing: 401,
  signature_invalid: 401, // malformed headers, wrong secret or tampered request
  signature_stale: 401, // timestamp outside the window
  signature_replayed: 401, // nonce already used
  not_found: 404, // no such endpoint
  script_not_found: 404,
  fence_not_found: 404,
  receipt_not_found: 404,
  method_not_allowed: 405,
  script_not_ready: 409, // readiness probe: that release generation is not live (yet)
  worker_events_off: 409, // tail: host.worker_events is false, the host collects no Worker events
  fence_active: 409, // another fence is active
  fence_lifted: 409, // beginning a fence id that was already lifted
  fence_required: 409, // a data snapshot needs the named fence to be the active one
  policy_revision_conflict: 409, // baseRevision is not the current revision
  revision_conflict: 409, // baseRevision is not the current runtime-config or operation-settings revision
  api_key_not_configured: 409, // api_key mode asked for without a key given or configured
  release_generation_mismatch: 409, // operation settings for a release the script does not hold
  mutation_conflict: 409, // mutationId reused with a different commandDigest
  binding_name_taken: 409, // a secret would shadow a binding of the script, or the reverse
  edge_host_script_retired: 410, // the script is retired; terminal
  pairing_rate_limited: 429, // too many failed pairing attempts from this address; retry-after says when
  request_too_large: 413,
  script_too_large: 413, // decoded modules exceed the limit (5 MiB by default)
  unsupported_media_type: 415,
  script_invalid: 422, // workerd refused the script; the message carries workerd's error
  edge_host_fenced: 423,
  internal_error: 500,
  host_full: 503, // every shard holds its maximum number of scripts
  host_busy: 503, // the host holds as many request bodies as it allows at once; retry shortly
} as const

export type ErrorCode = keyof typeof errorStatus

export const errorBodySchema = z.strictObject({code: z.string(), message: z.string()})
export type ErrorBody = {code: ErrorCode; message: string}

// ── Shared values ───────────────────────────────────────────────────────────────────────────────

export const SCRIPT_NAME_PATTERN = /^dw-[0-9a-f]{48}$/
/** Opaque to the host; the kit sends its 32-hex release generation. */
export const releaseGenerationSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, {
  error: 'must be 1–128 characters of letters, digits, ".", "_", ":" or "-"',
})
const identifierPattern = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/
/** Names of bindings, secrets and Durable Object classes: they become JavaScript property names. */
export const identifierSchema = z.string().regex(identifierPattern, {error: 'must be an identifier of at most 64 characters'})
const hex64 = z.string().regex(/^[0-9a-f]{64}$/, {error: 'must be 64 lowercase hex characters'})
export const sha256HexSchema = hex64
const isoTime = z.string()
/** Path segments of letters, digits, "_", "-" and "."; no segment starts with "." (so no "..") */
export const moduleNameSchema = z
  .string()
  .max(256)
  .regex(/^[A-Za-z0-9_-][A-Za-z0-9_.-]*(\/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*$/, {error: 'must be a relative module path'})
export const mutationIdSchema = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, {error: 'must be 1–128 characters of [A-Za-z0-9_.:-]'})
export const fenceIdSchema = mutationIdSchema
export const serviceAccountIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, {error: 'must be 1–128 characters of [A-Za-z0-9_-]'})

/** The binding under which a script's service-account credentials reach it (JSON: id → {username, password}). */
export const SERVICE_ACCOUNTS_BINDING = 'SERVICE_ACCOUNTS'
/** The binding under which a script's runtime config reaches it (JSON: key → the stored object). */
export const RUNTIME_CONFIG_BINDING = 'RUNTIME_CONFIG'
/** The binding under which a script's operation settings reach it (the stored JSON object; absent when none). */
export const OPERATION_SETTINGS_BINDING = 'OPERATION_SETTINGS'
/** Binding names the host fills itself; an upload may not use them. */
export const RESERVED_BINDINGS = [SERVICE_ACCOUNTS_BINDING, RUNTIME_CONFIG_BINDING, OPERATION_SETTINGS_BINDING] as const
/** Largest runtime-config value or operation-settings document, in UTF-8 bytes of its JSON text. */
export const MAX_CONTROL_JSON_BYTES = 65_536
/** Largest integer a revision may be (2^53 − 1: exact in every JSON reader). */
export const MAX_REVISION = Number.MAX_SAFE_INTEGER

// ── Identity and pairing ────────────────────────────────────────────────────────────────────────

export const identitySchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  /** base64 of the raw 32-byte Ed25519 public key. */
  hostPublicKey: z.string(),
  /** SHA-256 hex of the raw public key (see fingerprintOf). */
  fingerprint: hex64,
  /** onprem:<first 12 hex of the fingerprint> (see kitScopeFor). */
  scope: z.string(),
  paired: z.boolean(),
  /** Where the data plane answers: Workers are at <publicUrl>/<script>/… and <script>.<baseDomain>. */
  publicUrl: z.string(),
  baseDomain: z.string(),
})
export type Identity = z.infer<typeof identitySchema>

export const pairRequestSchema = z.strictObject({code: z.string().min(1).max(64)})
export type PairRequest = z.infer<typeof pairRequestSchema>

export const pairResponseSchema = z.strictObject({
  /** 64 hex: the HMAC key for every later request. Store it; the host never shows it again. */
  secret: z.string(),
  hostPublicKey: z.string(),
  fingerprint: hex64,
  scope: z.string(),
  /** base64 Ed25519 signature by the host key over pairingProofMessage(code, secret). */
  proof: z.string(),
  pairedAt: isoTime,
})
export type PairResponse = z.infer<typeof pairResponseSchema>

// ── Scripts ─────────────────────────────────────────────────────────────────────────────────────

/**
 * `sourceMap`: the source map of the module named like it without `.map` (wrangler's
 * upload_source_maps). The host keeps it to map Workers' stacks; workerd never loads it.
 */
export const moduleTypes = ['esModule', 'commonJs', 'text', 'json', 'data', 'wasm', 'sourceMap'] as const
export type ModuleType = (typeof moduleTypes)[number]

export const moduleUploadSchema = z.strictObject({
  name: moduleNameSchema,
  type: z.enum(moduleTypes).default('esModule'),
  contentBase64: z.base64({error: 'must be base64'}),
})

export const bindingSchema = z.discriminatedUnion('type', [
  z.strictObject({type: z.literal('plain_text'), name: identifierSchema, text: z.string()}),
  z.strictObject({type: z.literal('json'), name: identifierSchema, json: z.json()}),
  /** A Durable Object class exported by the script itself; its storage lives on the host's disk. */
  z.strictObject({type: z.literal('durable_object_namespace'), name: identifierSchema, className: identifierSchema}),
  /**
   * `env.<name>.fetch()` reaches the current release of another script on this host, on whichever
   * shard runs it (through the host, so a redeploy of the target does not break the caller). The
   * kit checks that both belong to one company; the host routes without an access-policy check.
   */
  z.strictObject({type: z.literal('service'), name: identifierSchema, script: z.string().regex(SCRIPT_NAME_PATTERN, {error: 'must be a script name'})}),
])
export type Binding = z.infer<typeof bindingSchema>

export const uploadScriptSchema = z
  .strictObject({
    releaseGeneration: releaseGenerationSchema,
    /** Name of the ES module whose default export handles requests. */
    mainModule: moduleNameSchema,
    compatibilityDate: z.iso.date({error: 'must be a date written YYYY-MM-DD'}),
    compatibilityFlags: z
      .array(z.string().regex(/^[a-z0-9_]{1,128}$/))
      .max(64)
      .default([]),
    builderPolicy: z.string().regex(/^department-worker-project-v2\.(0|[1-9][0-9]*)$/, {
      error: 'must be department-worker-project-v2.N',
    }),
    tags: z.array(z.string().min(1).max(256)).max(32).default([]),
    modules: z.array(moduleUploadSchema).min(1).max(1_000),
    bindings: z.array(bindingSchema).max(256).default([]),
  })
  .superRefine((upload, context) => {
    const moduleNames = upload.modules.map((module) => module.name)
    const main = upload.modules.find((module) => module.name === upload.mainModule)
    if (!main) context.addIssue({code: 'custom', path: ['mainModule'], message: `${upload.mainModule} is not among the modules`})
    else if (main.type !== 'esModule') context.addIssue({code: 'custom', path: ['mainModule'], message: 'the main module must be an esModule'})
    const duplicateModule = moduleNames.find((name, index) => moduleNames.indexOf(name) !== index)
    if (duplicateModule) context.addIssue({code: 'custom', path: ['modules'], message: `module ${duplicateModule} appears twice`})
    const bindingNames = upload.bindings.map((binding) => binding.name)
    const duplicateBinding = bindingNames.find((name, index) => bindingNames.indexOf(name) !== index)
    if (duplicateBinding) context.addIssue({code: 'custom', path: ['bindings'], message: `binding ${duplicateBinding} appears twice`})
    const reserved = RESERVED_BINDINGS.find((name) => bindingNames.includes(name))
    if (reserved) context.addIssue({code: 'custom', path: ['bindings'], message: `${reserved} is reserved for the host's control state`})
  })
/** What a client sends; `ValidUploadScript` is the same after validation, defaults filled in. */
export type UploadScript = z.input<typeof uploadScriptSchema>
export type ValidUploadScript = z.output<typeof uploadScriptSchema>

export const scriptStates = ['active', 'locked_down', 'retired'] as const
export type ScriptState = (typeof scriptStates)[number]

export const moduleInfoSchema = z.strictObject({name: z.string(), type: z.enum(moduleTypes), sha256: hex64, size: z.number().int()})
export type ModuleInfo = z.infer<typeof moduleInfoSchema>

/** Bindings as read back: names and kinds; text and JSON values are not echoed. */
export const bindingInfoSchema = z.strictObject({
  type: z.enum(['plain_text', 'json', 'durable_object_namespace', 'service']),
  name: z.string(),
  className: z.string().optional(),
  script: z.string().optional(),
})
export type BindingInfo = z.infer<typeof bindingInfoSchema>

export const scriptDetailsSchema = z.strictObject({
  name: z.string(),
  state: z.enum(scriptStates),
  /** The stored release; null only for a name retired before anything was uploaded. */
  releaseGeneration: z.string().nullable(),
  /** The release the running shard serves right now; null while not (yet) live or when retired. */
  liveReleaseGeneration: z.string().nullable(),
  mainModule: z.string().nullable(),
  compatibilityDate: z.string().nullable(),
  compatibilityFlags: z.array(z.string()),
  builderPolicy: z.string().nullable(),
  tags: z.array(z.string()),
  modules: z.array(moduleInfoSchema),
  bindings: z.array(bindingInfoSchema),
  shard: z.number().int().nullable(),
  createdAt: isoTime,
  updatedAt: isoTime,
  lockedDownAt: isoTime.nullable(),
  retiredAt: isoTime.nullable(),
})
export type ScriptDetails = z.infer<typeof scriptDetailsSchema>

export const scriptSummarySchema = scriptDetailsSchema.pick({name: true, state: true, releaseGeneration: true, tags: true, updatedAt: true})
export type ScriptSummary = z.infer<typeof scriptSummarySchema>

export const scriptListSchema = z.strictObject({
  scripts: z.array(scriptSummarySchema),
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: z.string().nullable(),
})
export type ScriptList = z.infer<typeof scriptListSchema>

export const MAX_LISTING_PAGE_SIZE = 1_000

// ── Control calls: access policy, lockdown, secrets, service accounts, receipts ────────────────

/** Optional on every control call; makes it idempotent and leaves a receipt. */
const controlMetaShape = {
  mutationId: mutationIdSchema.optional(),
  commandDigest: hex64.optional(),
}
export type ControlMeta = {mutationId?: string; commandDigest?: string}
const controlMetaPaired: [(body: ControlMeta) => boolean, {message: string; path: string[]}] = [
  (body) => (body.mutationId === undefined) === (body.commandDigest === undefined),
  {message: 'mutationId and commandDigest go together', path: ['mutationId']},
]
/** The body of control calls that carry nothing else (lockdown, deletes, purges); may be empty. */
export const controlMetaBodySchema = z.strictObject(controlMetaShape).refine(...controlMetaPaired)

export const accessPolicyModes = ['public', 'api_key', 'teamsync_internal'] as const
export type AccessPolicyMode = (typeof accessPolicyModes)[number]

/**
 * The policy as the host holds it. Keys are snake_case on purpose: this is exactly the `current`
 * object a control-plane audit row records and validates ({api_key_configured, api_key_last_four,
 * ip_allowlist, mode, revision, updated_at}).
 */
export const accessPolicySchema = z.strictObject({
  mode: z.enum(accessPolicyModes),
  api_key_configured: z.boolean(),
  api_key_last_four: z.string().nullable(),
  ip_allowlist: z.array(z.string()),
  revision: z.number().int(),
  updated_at: isoTime,
})
export type AccessPolicy = z.infer<typeof accessPolicySchema>

export const ipOrCidrSchema = z.union([z.ipv4(), z.ipv6(), z.cidrv4(), z.cidrv6()], {error: 'must be an IP address or CIDR block'})

export const replaceAccessPolicySchema = z
  .strictObject({
    mode: z.enum(accessPolicyModes),
    /**
     * api_key mode: SHA-256 hex of the API key. The key itself never reaches the host; callers send
     * it in `x-api-key` (or `authorization: Bearer`) and the host compares digests. Omitted, the key
     * configured now is kept (409 api_key_not_configured when there is none); leaving api_key mode
     * drops the key.
     */
    apiKeySha256: hex64.optional(),
    apiKeyLastFour: z.string().length(4).optional(),
    /** teamsync_internal mode: client addresses allowed through (empty = nobody). */
    ipAllowlist: z.array(ipOrCidrSchema).max(1_000).optional(),
    /** When given, refused with 409 policy_revision_conflict unless it is the current revision. */
    baseRevision: z.number().int().min(0).optional(),
    ...controlMetaShape,
  })
  .refine(...controlMetaPaired)
  .superRefine((body, context) => {
    if (body.mode !== 'api_key' && (body.apiKeySha256 || body.apiKeyLastFour)) {
      context.addIssue({code: 'custom', path: ['apiKeySha256'], message: 'only api_key mode takes an API key'})
    }
    if (body.mode !== 'teamsync_internal' && body.ipAllowlist !== undefined) {
      context.addIssue({code: 'custom', path: ['ipAllowlist'], message: 'only teamsync_internal mode takes an IP allowlist'})
    }
  })
export type ReplaceAccessPolicy = z.input<typeof replaceAccessPolicySchema>

/** A revision as the kit sends it: a true integer 0…2^53−1. */
export const revisionSchema = z.number().int().min(0).max(MAX_REVISION)
const jsonObjectTextSchema = z
  .string()
  .refine((text) => Buffer.byteLength(text, 'utf8') <= MAX_CONTROL_JSON_BYTES, {message: `must be at most ${MAX_CONTROL_JSON_BYTES} UTF-8 bytes`})
  .refine(isJsonObjectText, {message: 'must be the JSON text of an object'})

function isJsonObjectText(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text)
    return value !== null && typeof value === 'object' && !Array.isArray(value)
  } catch {
    return false
  }
}

/** Runtime-config keys become property names of the RUNTIME_CONFIG binding. */
export const runtimeConfigKeySchema = identifierSchema

export const rotateApiKeySchema = z
  .strictObject({apiKeySha256: hex64, apiKeyLastFour: z.string().length(4), baseRevision: revisionSchema, ...controlMetaShape})
  .refine(...controlMetaPaired)
export type RotateApiKey = z.input<typeof rotateApiKeySchema>

/** Revokes and deletes: the revision the caller saw (409 on any other). */
export const revisionOnlySchema = z.strictObject({baseRevision: revisionSchema, ...controlMetaShape}).refine(...controlMetaPaired)
export type RevisionOnly = z.input<typeof revisionOnlySchema>

export const putRuntimeConfigSchema = z
  .strictObject({valueJson: jsonObjectTextSchema, baseRevision: revisionSchema, ...controlMetaShape})
  .refine(...controlMetaPaired)
export type PutRuntimeConfig = z.input<typeof putRuntimeConfigSchema>

export const replaceOperationSettingsSchema = z
  .strictObject({releaseGeneration: releaseGenerationSchema, settingsJson: jsonObjectTextSchema, baseRevision: revisionSchema, ...controlMetaShape})
  .refine(...controlMetaPaired)
export type ReplaceOperationSettings = z.input<typeof replaceOperationSettingsSchema>

/** One runtime-config key: its value as canonical JSON text and that text's SHA-256; null values once deleted. */
export const runtimeConfigEntrySchema = z.strictObject({
  key: z.string(),
  valueJson: z.string().nullable(),
  sha256: hex64.nullable(),
  revision: z.number().int(),
  updated_at: isoTime,
})
export type RuntimeConfigEntry = z.infer<typeof runtimeConfigEntrySchema>
export const runtimeConfigListSchema = z.strictObject({
  revision: z.number().int(),
  entries: z.array(z.strictObject({key: z.string(), valueJson: z.string(), sha256: hex64, updated_at: isoTime})),
})
export type RuntimeConfigList = z.infer<typeof runtimeConfigListSchema>

/** The operation settings of a script as reconciled with its revision (no settings stored: null digest and release). */
export const operationSettingsSchema = z.strictObject({
  state: z.literal('reconciled'),
  releaseGeneration: z.string().nullable(),
  settingsSha256: hex64.nullable(),
  revision: z.number().int(),
  updated_at: isoTime,
})
export type OperationSettings = z.infer<typeof operationSettingsSchema>

/** Longest secret value the host takes, in characters. */
export const MAX_SECRET_VALUE_LENGTH = 65_536
export const putSecretSchema = z.strictObject({value: z.string().max(MAX_SECRET_VALUE_LENGTH), ...controlMetaShape}).refine(...controlMetaPaired)
export type PutSecret = z.input<typeof putSecretSchema>

export const putServiceAccountSchema = z
  .strictObject({username: z.string().min(1).max(256), password: z.string().min(1).max(4_096), ...controlMetaShape})
  .refine(...controlMetaPaired)
export type PutServiceAccount = z.input<typeof putServiceAccountSchema>

export const secretInfoSchema = z.strictObject({name: z.string(), sha256: hex64, updated_at: isoTime})
export const secretDeletionSchema = z.strictObject({name: z.string(), deleted: z.boolean(), updated_at: isoTime})
export const serviceAccountInfoSchema = z.strictObject({
  serviceAccountId: z.string(),
  username: z.string(),
  passwordDigest: hex64,
  updated_at: isoTime,
})
export const serviceAccountDeletionSchema = z.strictObject({serviceAccountId: z.string(), deleted: z.boolean(), updated_at: isoTime})
export const purgeSchema = z.strictObject({purged: z.array(z.string()), updated_at: isoTime})
export const lockdownSchema = z.strictObject({name: z.string(), state: z.enum(scriptStates), lockedDownAt: isoTime})
export const secretListSchema = z.strictObject({secrets: z.array(secretInfoSchema)})
export const serviceAccountListSchema = z.strictObject({serviceAccounts: z.array(serviceAccountInfoSchema)})

export type SecretInfo = z.infer<typeof secretInfoSchema>
export type SecretDeletion = z.infer<typeof secretDeletionSchema>
export type ServiceAccountInfo = z.infer<typeof serviceAccountInfoSchema>
export type ServiceAccountDeletion = z.infer<typeof serviceAccountDeletionSchema>
export type Purge = z.infer<typeof purgeSchema>
export type Lockdown = z.infer<typeof lockdownSchema>
export type SecretList = z.infer<typeof secretListSchema>
export type ServiceAccountList = z.infer<typeof serviceAccountListSchema>

/** What a control call answers, and what its receipt holds. `conflict` is always false on the host. */
export type ControlResult<T> = {conflict: false; current: T}
export type DeleteResult<T> = {conflict: false; deleted: boolean; current: T}
export type RevokeResult<T> = {conflict: false; revoked: boolean; current: T}

export const receiptOperations = [
  'retirement.lockdown',
  'access_policy.replace',
  'access_policy.api_key.rotate',
  'access_policy.api_key.revoke',
  'runtime_config.replace',
  'runtime_config.delete',
  'operation_settings.replace',
  'operation_settings.revoke',
  'secrets.put',
  'secrets.delete',
  'secrets.purge',
  'service_accounts.credentials.put',
  'service_accounts.credentials.delete',
  'service_accounts.credentials.purge',
] as const
export type ReceiptOperation = (typeof receiptOperations)[number]

export const receiptSchema = z.strictObject({
  mutationId: z.string(),
  commandDigest: hex64,
  operation: z.enum(receiptOperations),
  scriptName: z.string(),
  result: z.record(z.string(), z.unknown()),
  createdAt: isoTime,
  acknowledgedAt: isoTime.nullable(),
})
export type Receipt = z.infer<typeof receiptSchema>

// ── Fences ──────────────────────────────────────────────────────────────────────────────────────

export const beginFenceSchema = z.strictObject({
  /** Chosen by the kit (it records the fence first); beginning the same active id again is a no-op. */
  fenceId: fenceIdSchema,
  /** The host lifts the fence by itself after this long; capped by the host's fence.max_ttl_seconds. */
  ttlSeconds: z.number().int().min(1),
  reason: z.string().max(500).default(''),
})
export type BeginFence = z.input<typeof beginFenceSchema>
export type ValidBeginFence = z.output<typeof beginFenceSchema>

export const fenceSchema = z.strictObject({
  fenceId: z.string(),
  reason: z.string(),
  state: z.enum(['active', 'lifted']),
  startedAt: isoTime,
  expiresAt: isoTime,
  liftedAt: isoTime.nullable(),
  /** `ended` by a call, or `expired` at its TTL (then liftedAt = expiresAt). */
  liftReason: z.enum(['ended', 'expired']).nullable(),
})
export type Fence = z.infer<typeof fenceSchema>

export const fenceStatusSchema = z.strictObject({
  active: fenceSchema.nullable(),
  /** The most recently lifted fences, newest first (at most 100). */
  recent: z.array(fenceSchema),
})
export type FenceStatus = z.infer<typeof fenceStatusSchema>

// ── Inventory ───────────────────────────────────────────────────────────────────────────────────

export const shardStates = ['stopped', 'starting', 'up', 'swapping', 'down'] as const

export const inventorySchema = z.strictObject({
  generatedAt: isoTime,
  scope: z.string(),
  fence: fenceSchema.nullable(),
  counts: z.strictObject({active: z.number().int(), locked_down: z.number().int(), retired: z.number().int()}),
  shards: z.array(
    z.strictObject({
      index: z.number().int(),
      state: z.enum(shardStates),
      scripts: z.number().int(),
      restarts: z.number().int(),
    }),
  ),
  scripts: z.array(
    z.strictObject({
      name: z.string(),
      state: z.enum(scriptStates),
      releaseGeneration: z.string().nullable(),
      liveReleaseGeneration: z.string().nullable(),
      shard: z.number().int().nullable(),
      policyRevision: z.number().int(),
    }),
  ),
  /** Scripts whose current release is quarantined after runaway incidents (503 until the next deploy). */
  quarantined: z.array(
    z.strictObject({script: z.string(), releaseGeneration: z.string(), incidents: z.number().int(), lastIncident: z.string(), quarantinedAt: isoTime}),
  ),
})
export type Inventory = z.infer<typeof inventorySchema>

// ── Data snapshot ───────────────────────────────────────────────────────────────────────────────
//
// GET /v1/snapshot?fenceId=F answers a tar stream (ustar, not compressed) of the host's data dir as of
// the call, taken while fence F keeps the host state frozen: `snapshot.json` first (the schema below),
// then `host.sqlite` (the state: scripts with their module bytes, policies, secrets, pairing, fences),
// `identity.key`, and `do/<script>/…` (each Durable Object SQLite file). SQLite files are copied
// with SQLite's online backup API, so the data plane keeps writing Durable Objects meanwhile and
// every copy is still a consistent database. In the copy, fence F is recorded as lifted: a host
// started from the snapshot is not frozen. Extracted into an empty directory, the files are a data
// dir `edgeworkers host serve --data-dir` starts from (same identity, pairing, scripts and data).

export const SNAPSHOT_MANIFEST_FILE = 'snapshot.json'

/** A relative path inside a snapshot: plain segments, no `.`/`..`, no leading slash. */
export const snapshotPathSchema = z
  .string()
  .max(1024)
  .regex(/^(?!\.{1,2}(\/|$))[^/\0]+(\/(?!\.{1,2}(\/|$))[^/\0]+)*$/, {error: 'must be a relative path without . or .. segments'})

export const snapshotManifestSchema = z.strictObject({
  formatVersion: z.literal(1),
  fenceId: z.string(),
  scope: z.string(),
  fingerprint: hex64,
  createdAt: isoTime,
  /** Every file after snapshot.json, in archive order. */
  files: z.array(z.strictObject({path: snapshotPathSchema, size: z.number().int().min(0), sha256: hex64})),
})
export type SnapshotManifest = z.infer<typeof snapshotManifestSchema>
