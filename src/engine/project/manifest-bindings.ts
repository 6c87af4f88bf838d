// The bindings an edgeworker.json declares besides vars and static data: their schemas (spread
// into the manifest's) and the one naming rule they share — a binding name appears once in its
// list and once in the Worker's env, where vars, the reserved names and every list share it.
import {z} from 'zod'
import {
  D1_DATABASE_ID_PATTERN,
  identifierSchema,
  KV_NAMESPACE_ID_PATTERN,
  queueConsumerSettingsShape,
  queueDelaySchema,
  queueNameSchema,
  R2_BUCKET_NAME_PATTERN,
  R2_BUCKET_NAME_RULE,
  SERVICE_ACCOUNTS_BINDING,
} from '../../protocol/management-api.js'

const identifier = z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$]*$/, {error: 'must be a JavaScript identifier'})
const PRINTABLE_ID_RULE = 'must be 1–128 printable ASCII characters without spaces'
export const STATIC_DATA_BINDING = 'STATIC_DATA'

/**
 * Workers this one calls through `env.<binding>.fetch()`: the current Worker of another department
 * of the same company (checked when the deploy is enqueued, see ../deploy/enqueue.ts).
 */
const serviceSchema = z.strictObject({
  binding: identifierSchema,
  department: z.string().min(1).max(256),
  // Named entrypoints need a socket per entrypoint in the target's shard; not built yet.
  entrypoint: z
    .unknown()
    .refine(() => false, {error: 'named entrypoints are not supported yet; bind the default export'})
    .optional(),
})

export const manifestBindingsShape = {
  durableObjects: z.array(z.strictObject({binding: identifier, className: identifier})).optional(),
  /** A namespace belongs to this department's Worker: another Worker naming the same id has its own. */
  kvNamespaces: z
    .array(z.strictObject({binding: identifierSchema, id: z.string().regex(KV_NAMESPACE_ID_PATTERN, {error: PRINTABLE_ID_RULE})}))
    .max(64)
    .optional(),
  /** A database belongs to this department's Worker; its id is `id`, else `databaseName`, else the binding (d1DatabaseIdOf). */
  d1Databases: z
    .array(
      z.strictObject({
        binding: identifierSchema,
        databaseName: z.string().regex(D1_DATABASE_ID_PATTERN, {error: PRINTABLE_ID_RULE}).optional(),
        id: z.string().regex(D1_DATABASE_ID_PATTERN, {error: PRINTABLE_ID_RULE}).optional(),
        /** Where `edgeworkers d1 migrations apply` finds NNNN_name.sql files, relative to the project; "migrations" by default. */
        migrationsDir: z.string().min(1).max(256).optional(),
        /** The table recording applied migrations; "d1_migrations" by default. */
        migrationsTable: identifierSchema.optional(),
      }),
    )
    .max(64)
    .optional(),
  /** A bucket belongs to this department's Worker: another Worker naming the same bucket has its own. */
  r2Buckets: z
    .array(z.strictObject({binding: identifierSchema, bucketName: z.string().regex(R2_BUCKET_NAME_PATTERN, {error: R2_BUCKET_NAME_RULE})}))
    .max(64)
    .optional(),
  /** Queues of this department's Worker: it consumes what it produces (README "Queues"). */
  queues: z
    .strictObject({
      producers: z
        .array(z.strictObject({binding: identifierSchema, queue: queueNameSchema, deliveryDelay: queueDelaySchema.optional()}))
        .max(64)
        .optional(),
      consumers: z
        .array(z.strictObject({queue: queueNameSchema, ...queueConsumerSettingsShape}))
        .max(64)
        .optional(),
    })
    .optional(),
  services: z.array(serviceSchema).max(64).optional(),
}

type DeclaredBindings = {[key in keyof typeof manifestBindingsShape]?: z.infer<(typeof manifestBindingsShape)[key]>} & {
  vars?: Record<string, unknown>
  assets?: {binding?: string}
}

/** The first binding name used twice (in one list, or across the env), as the refusal's `key "…": …` text. */
export function bindingNameProblem(manifest: DeclaredBindings): string | null {
  const lists: Array<[string, Array<{binding: string}> | undefined]> = [
    ['durableObjects', manifest.durableObjects],
    ['kvNamespaces', manifest.kvNamespaces],
    ['d1Databases', manifest.d1Databases],
    ['r2Buckets', manifest.r2Buckets],
    ['queues.producers', manifest.queues?.producers],
    ['services', manifest.services],
  ]
  for (const [key, list] of lists) {
    const seen = new Set<string>()
    for (const {binding} of list ?? []) {
      if (seen.has(binding)) return `key "${key}" binds ${JSON.stringify(binding)} more than once`
      seen.add(binding)
    }
  }
  const owners = new Map<string, string>([
    [STATIC_DATA_BINDING, 'staticData'],
    [SERVICE_ACCOUNTS_BINDING, 'service-account credentials'],
  ])
  const claims: Array<[string, string]> = [
    ...Object.keys(manifest.vars ?? {}).map((name): [string, string] => [name, `vars.${name}`]),
    ...lists.flatMap(([key, list]) => (list ?? []).map(({binding}, index): [string, string] => [binding, `${key}[${index}].binding`])),
    ...(manifest.assets?.binding === undefined ? [] : [[manifest.assets.binding, 'assets.binding'] as [string, string]]),
  ]
  for (const [name, key] of claims) {
    const owner = owners.get(name)
    if (owner !== undefined) return `key "${key}": the binding name ${JSON.stringify(name)} is already taken by ${owner}`
    owners.set(name, key)
  }
  return null
}
