// Control calls (access policy, lockdown, runtime config, operation settings, secrets, service
// accounts) and their receipts. Every control call may carry `mutationId` + `commandDigest`: the host
// then stores the result as a receipt in the same transaction, and a repeat of the same mutation
// returns that receipt's result without applying it again (a different digest under the same id →
// 409 mutation_conflict).
import {z} from 'zod'
import {hex64, identifierSchema, isoTime, MAX_CONTROL_JSON_BYTES, MAX_REVISION, mutationIdSchema, releaseGenerationSchema} from './common.js'
import {scriptStates} from './scripts.js'

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
export const jsonObjectTextSchema = z
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
export const controlResultSchema = <T extends z.ZodType>(current: T) => z.strictObject({conflict: z.literal(false), current})
export const deleteResultSchema = <T extends z.ZodType>(current: T) => z.strictObject({conflict: z.literal(false), deleted: z.boolean(), current})
export const revokeResultSchema = <T extends z.ZodType>(current: T) => z.strictObject({conflict: z.literal(false), revoked: z.boolean(), current})

/** The control mutations a kit sends on an operator's behalf (and audits, see engine/control/operations.ts). */
export const controlMutationOperations = [
  'access_policy.replace',
  'access_policy.api_key.rotate',
  'access_policy.api_key.revoke',
  'runtime_config.replace',
  'runtime_config.delete',
  'operation_settings.replace',
  'operation_settings.revoke',
  'secrets.put',
  'secrets.delete',
  'service_accounts.credentials.put',
  'service_accounts.credentials.delete',
] as const
export type ControlMutationOperation = (typeof controlMutationOperations)[number]

/** Every operation the host keeps a receipt of: the control mutations, the retirement lockdown and the purges. */
export const receiptOperations = ['retirement.lockdown', ...controlMutationOperations, 'secrets.purge', 'service_accounts.credentials.purge'] as const
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

/** The host's answer to a receipt acknowledgement, exactly. */
export const receiptAckSchema = z.strictObject({acknowledged: z.literal(true)})
