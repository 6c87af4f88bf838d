// Identity, pairing and scripts: what the host says about itself, the one-time pairing exchange,
// and a script's upload, details and listing.
import {z} from 'zod'
import {releaseAssetsSchema} from './assets.js'
import {cronListSchema} from './crons.js'
import {queueConsumerSchema, queueConsumersProblem, queueDelaySchema, queueNameSchema} from './queues.js'
import {API_VERSION, hex64, identifierSchema, isoTime, moduleNameSchema, RESERVED_BINDINGS, releaseGenerationSchema, SCRIPT_NAME_PATTERN} from './common.js'

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
  /** host.experimental: workerd runs with --experimental, so Workers may use flags workerd marks experimental. */
  experimental: z.boolean(),
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

/** The most modules one script may have: the host refuses an upload with more. */
export const MAX_SCRIPT_MODULES = 1_000

export const moduleUploadSchema = z.strictObject({
  name: moduleNameSchema,
  type: z.enum(moduleTypes).default('esModule'),
  contentBase64: z.base64({error: 'must be base64'}),
})

/** A KV namespace id: wrangler's `id` (Cloudflare's are 32 hex), or the binding name when there is none. */
export const KV_NAMESPACE_ID_PATTERN = /^[\x21-\x7e]{1,128}$/
const kvNamespaceIdSchema = z.string().regex(KV_NAMESPACE_ID_PATTERN, {error: 'must be 1–128 printable ASCII characters without spaces'})
/** A D1 database id: wrangler's `database_id` (Cloudflare's are UUIDs), else its `database_name`, else the binding name. */
export const D1_DATABASE_ID_PATTERN = KV_NAMESPACE_ID_PATTERN
const d1DatabaseIdSchema = z.string().regex(D1_DATABASE_ID_PATTERN, {error: 'must be 1–128 printable ASCII characters without spaces'})

/** An R2 bucket name, R2's rule: 3–63 lowercase letters, digits and "-", starting and ending with a letter or digit. */
export const R2_BUCKET_NAME_PATTERN = /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/
export const R2_BUCKET_NAME_RULE = 'must be 3–63 lowercase letters, digits or "-", starting and ending with a letter or digit'

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
  /** `env.<name>.fetch(request)` answers from the script's own static assets (the release's `assets`). */
  z.strictObject({type: z.literal('assets'), name: identifierSchema}),
  /** A KV namespace of the script's own, named by its id; the host keeps its data (README "KV namespaces"). */
  z.strictObject({type: z.literal('kv_namespace'), name: identifierSchema, namespaceId: kvNamespaceIdSchema}),
  /** A D1 database of the script's own, named by its id; the host keeps its data (README "D1 databases"). */
  z.strictObject({type: z.literal('d1_database'), name: identifierSchema, databaseId: d1DatabaseIdSchema}),
  /** An R2 bucket of the script's own, named by its bucket name; the host keeps its objects (README "R2 buckets"). */
  z.strictObject({type: z.literal('r2_bucket'), name: identifierSchema, bucketName: z.string().regex(R2_BUCKET_NAME_PATTERN, {error: R2_BUCKET_NAME_RULE})}),
  /** A producer of one of the script's own queues (README "Queues"); `deliveryDelay`: seconds a send waits by default. */
  z.strictObject({type: z.literal('queue'), name: identifierSchema, queue: queueNameSchema, deliveryDelay: queueDelaySchema.default(0)}),
])
export type Binding = z.infer<typeof bindingSchema>

/** A version id as the kit names it (a UUID): what the `Cloudflare-Workers-Version-Overrides` header names. */
const versionIdSchema = z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, {error: 'must be a version id'})

/** A gradual deployment's other release: the one kept serving beside the uploaded release, and its share. */
export const releaseSplitSchema = z.strictObject({
  /** The script's current release, or the one its split keeps already; any other is refused (409 split_release_missing). */
  releaseGeneration: releaseGenerationSchema,
  /** The kit's ids of the version it is (the override header reaches it by any of them). */
  versionIds: z.array(versionIdSchema).max(4),
  /** Its share of the requests; the uploaded release serves the rest. */
  percentage: z.number().int().min(0).max(100),
})
export type ReleaseSplit = z.infer<typeof releaseSplitSchema>

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
    /** The kit's id of the department the script belongs to: the `department` label of its metrics. */
    department: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, {error: 'must be a department id'})
      .nullable()
      .default(null),
    modules: z.array(moduleUploadSchema).min(1).max(MAX_SCRIPT_MODULES),
    bindings: z.array(bindingSchema).max(256).default([]),
    /** Static assets the host serves for this release; each file's bytes must be on the host already (POST /v1/assets). */
    assets: releaseAssetsSchema.nullable().default(null),
    /** Cron triggers (./crons.ts): the host runs the Worker's scheduled() handler on each, in UTC. */
    crons: cronListSchema.default([]),
    /** The script's queue() handler consumes these queues of its own (./queues.ts). */
    queueConsumers: z.array(queueConsumerSchema).max(64).default([]),
    /** The kit's ids of the version this release is: tail events and the override header name it by them. */
    versionIds: z.array(versionIdSchema).max(4).default([]),
    /** A gradual deployment: the release kept serving beside this one, and its share; null serves this one alone. */
    split: releaseSplitSchema.nullable().default(null),
  })
  .superRefine((upload, context) => {
    if (upload.split?.releaseGeneration === upload.releaseGeneration)
      context.addIssue({code: 'custom', path: ['split', 'releaseGeneration'], message: 'a split keeps another release beside the uploaded one'})
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
    if (upload.assets === null && upload.bindings.some((binding) => binding.type === 'assets'))
      context.addIssue({code: 'custom', path: ['bindings'], message: 'an assets binding needs assets'})
    const produced = upload.bindings.flatMap((binding) => (binding.type === 'queue' ? [binding.queue] : []))
    const queues = queueConsumersProblem(produced, upload.queueConsumers)
    if (queues) context.addIssue({code: 'custom', path: ['queueConsumers', ...(queues.index === null ? [] : [queues.index])], message: queues.message})
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
  type: z.enum(['plain_text', 'json', 'durable_object_namespace', 'service', 'assets', 'kv_namespace', 'd1_database', 'r2_bucket', 'queue']),
  name: z.string(),
  className: z.string().optional(),
  script: z.string().optional(),
})
export type BindingInfo = z.infer<typeof bindingInfoSchema>

/** A retired script's data purge: whether the host held any data of it. */
export const dataPurgeSchema = z.strictObject({purged: z.boolean()})
export type DataPurge = z.infer<typeof dataPurgeSchema>

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
  /** The kit's ids of the version the stored release is. */
  versionIds: z.array(z.string()),
  /** The release kept serving beside it (a gradual deployment), or null. */
  split: releaseSplitSchema.nullable(),
})
export type ScriptDetails = z.infer<typeof scriptDetailsSchema>

export const scriptSummarySchema = scriptDetailsSchema.pick({name: true, state: true, releaseGeneration: true, tags: true, updatedAt: true}).extend({
  /** Moved to another host of the kit: not run here until the kit imports its data here again. */
  handedOver: z.boolean(),
})
export type ScriptSummary = z.infer<typeof scriptSummarySchema>

export const scriptListSchema = z.strictObject({
  scripts: z.array(scriptSummarySchema),
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: z.string().nullable(),
})
export type ScriptList = z.infer<typeof scriptListSchema>

export const MAX_LISTING_PAGE_SIZE = 1_000
