// The audited control operations: for each, the command the
// outbox keeps (exact fields, digests only — never a secret value, API key, password or salt), and the
// strict rules its host receipt must meet before the row may settle `completed`.
import {z} from 'zod'
import {canonicalDigest, canonicalJson, sha256Hex} from '../../canonical-json.js'
import {
  identifierSchema as identifier,
  ipOrCidrSchema as ipOrCidr,
  accessPolicyModes,
  controlMutationOperations,
  MAX_CONTROL_JSON_BYTES,
  releaseGenerationSchema,
  revisionSchema as baseRevision,
  serviceAccountIdSchema as serviceAccountId,
  sha256HexSchema as hex64,
} from '../../protocol/management-api.js'
import type {ControlMutation} from '../../provider/types.js'
import {SCRIPT_NAME_PATTERN} from '../../store/index.js'

export const CONTROL_OPERATIONS = controlMutationOperations
export const ACCESS_POLICY_MODES = accessPolicyModes
export type ControlOperation = (typeof CONTROL_OPERATIONS)[number]

/** Canonical JSON text of an object, at most 64 KiB of UTF-8: what runtime config and operation settings hold. */
export const canonicalObjectText = z.string().superRefine((text, context) => {
  if (Buffer.byteLength(text, 'utf8') > MAX_CONTROL_JSON_BYTES) {
    context.addIssue({code: 'custom', message: `must be at most ${MAX_CONTROL_JSON_BYTES} UTF-8 bytes`})
    return
  }
  const value = parseJson(text)
  if (value === undefined || value === null || typeof value !== 'object' || Array.isArray(value)) {
    context.addIssue({code: 'custom', message: 'must be a JSON object'})
  } else if (canonicalJson(value) !== text) {
    context.addIssue({code: 'custom', message: 'must be canonical JSON (keys sorted, no whitespace)'})
  }
})

/** The command each operation's outbox row carries: exactly these fields. */
export const commandSchemas = {
  'access_policy.replace': z
    .strictObject({mode: z.enum(ACCESS_POLICY_MODES), ipAllowlist: z.array(ipOrCidr).max(1_000), baseRevision})
    .refine((command) => command.mode === 'teamsync_internal' || command.ipAllowlist.length === 0, {
      message: 'only teamsync_internal mode takes an IP allowlist',
      path: ['ipAllowlist'],
    }),
  'access_policy.api_key.rotate': z.strictObject({apiKeySha256: hex64, lastFour: z.string().length(4), baseRevision}),
  'access_policy.api_key.revoke': z.strictObject({baseRevision}),
  'runtime_config.replace': z
    .strictObject({key: identifier, valueJson: canonicalObjectText, valueSha256: hex64, baseRevision})
    .refine((command) => sha256Hex(command.valueJson) === command.valueSha256, {message: 'is not the SHA-256 of valueJson', path: ['valueSha256']}),
  'runtime_config.delete': z.strictObject({key: identifier, baseRevision}),
  'operation_settings.replace': z
    .strictObject({releaseGeneration: releaseGenerationSchema, settingsJson: canonicalObjectText, settingsSha256: hex64, baseRevision})
    .refine((command) => sha256Hex(command.settingsJson) === command.settingsSha256, {message: 'is not the SHA-256 of settingsJson', path: ['settingsSha256']}),
  'operation_settings.revoke': z.strictObject({baseRevision}),
  'secrets.put': z.strictObject({name: identifier, valueDigest: hex64}),
  'secrets.delete': z.strictObject({name: identifier}),
  'service_accounts.credentials.put': z.strictObject({serviceAccountId, username: z.string().min(1).max(256), passwordDigest: hex64}),
  'service_accounts.credentials.delete': z.strictObject({serviceAccountId}),
} satisfies Record<ControlOperation, z.ZodType>

export type ControlCommand = {[K in ControlOperation]: z.infer<(typeof commandSchemas)[K]>}[ControlOperation]

/** The command of a mutation: every secret replaced by its digest, nothing else added or dropped. */
export function commandOf(mutation: ControlMutation): Record<string, unknown> {
  switch (mutation.operation) {
    case 'access_policy.replace':
      return {mode: mutation.mode, ipAllowlist: mutation.ipAllowlist, baseRevision: mutation.baseRevision}
    case 'access_policy.api_key.rotate':
      return {apiKeySha256: mutation.apiKeySha256, lastFour: mutation.apiKeyLastFour, baseRevision: mutation.baseRevision}
    case 'access_policy.api_key.revoke':
    case 'operation_settings.revoke':
      return {baseRevision: mutation.baseRevision}
    case 'runtime_config.replace':
      return {key: mutation.key, valueJson: mutation.valueJson, valueSha256: sha256Hex(mutation.valueJson), baseRevision: mutation.baseRevision}
    case 'runtime_config.delete':
      return {key: mutation.key, baseRevision: mutation.baseRevision}
    case 'operation_settings.replace':
      return {
        releaseGeneration: mutation.releaseGeneration,
        settingsJson: mutation.settingsJson,
        settingsSha256: sha256Hex(mutation.settingsJson),
        baseRevision: mutation.baseRevision,
      }
    case 'secrets.put':
      return {name: mutation.name, valueDigest: sha256Hex(mutation.value)}
    case 'secrets.delete':
      return {name: mutation.name}
    case 'service_accounts.credentials.put':
      return {serviceAccountId: mutation.serviceAccountId, username: mutation.username, passwordDigest: sha256Hex(mutation.password)}
    case 'service_accounts.credentials.delete':
      return {serviceAccountId: mutation.serviceAccountId}
  }
}

/** What the outbox row's payload holds: exactly these four. */
export const controlPayloadSchema = z.strictObject({
  operation: z.enum(CONTROL_OPERATIONS),
  command: z.record(z.string(), z.unknown()),
  commandDigest: hex64,
  actor: z.strictObject({type: z.string().min(1), id: z.string()}),
})
export type ControlPayload = {operation: ControlOperation; command: Record<string, unknown>; commandDigest: string; actor: {type: string; id: string}}

/** The digest the host files the receipt under: the operation, the script and the command, canonically. */
export function commandDigestOf(operation: ControlOperation, scriptName: string, command: Record<string, unknown>): string {
  return canonicalDigest({command, operation, scriptName})
}

/**
 * Strict enqueue validation: the script name pattern, the operation's exact command fields, and a
 * payload that is exactly {operation, command, commandDigest, actor} with the digest recomputed.
 * Returns the one-line problem, or null.
 */
export function controlPayloadProblem(scriptName: string, payload: unknown): string | null {
  if (!SCRIPT_NAME_PATTERN.test(scriptName)) return `script name ${JSON.stringify(scriptName)} must match ^dw-[0-9a-f]{48}$`
  const parsed = controlPayloadSchema.safeParse(payload)
  if (!parsed.success) return issueText('payload', parsed.error)
  const {operation, command, commandDigest} = parsed.data
  const checked = commandSchemas[operation].safeParse(command)
  if (!checked.success) return issueText(`${operation} command`, checked.error)
  if (commandDigest !== commandDigestOf(operation, scriptName, command)) return 'commandDigest does not match the command'
  return null
}

// ── Receipts ────────────────────────────────────────────────────────────────────────────────────

const RECEIPT_KEYS = ['acknowledgedAt', 'commandDigest', 'createdAt', 'mutationId', 'operation', 'result', 'scriptName']
const POLICY_KEYS = ['api_key_configured', 'api_key_last_four', 'ip_allowlist', 'mode', 'revision', 'updated_at']
const RUNTIME_CONFIG_KEYS = ['key', 'revision', 'sha256', 'updated_at', 'valueJson']
const OPERATION_SETTINGS_KEYS = ['releaseGeneration', 'revision', 'settingsSha256', 'state', 'updated_at']

/** The result key set per operation: revokes say whether anything was revoked, deletes whether anything was deleted. */
function resultKeys(operation: ControlOperation): string[] {
  if (operation === 'access_policy.api_key.revoke' || operation === 'operation_settings.revoke') return ['conflict', 'current', 'revoked']
  if (operation === 'secrets.delete' || operation === 'service_accounts.credentials.delete') return ['conflict', 'current', 'deleted']
  return ['conflict', 'current']
}

export interface ValidReceipt {
  /** The receipt's `current`, as the host recorded it. */
  current: Record<string, unknown>
  /** A revoke that revoked nothing or a delete that deleted nothing: audited as a no-op. */
  noop: boolean
}

/**
 * Checks a receipt read back for a row: the exact outer key set and identity, the operation's result
 * key set with `conflict: false`, and the operation's rules on `current` (revision base+1, or +0 for a
 * revoke that revoked nothing; a rotate shows the command's last four; runtime config is canonical
 * and hashes to its digest; …). Returns the one-line problem, or the validated receipt.
 */
export function validateReceipt(
  receipt: unknown,
  expected: {mutationId: string; scriptName: string; payload: ControlPayload},
): ValidReceipt | {problem: string} {
  const {operation, command, commandDigest} = expected.payload
  const outer = objectWithKeys(receipt, RECEIPT_KEYS, 'receipt')
  if (typeof outer === 'string') return {problem: outer}
  if (outer.mutationId !== expected.mutationId) return {problem: 'the receipt names another mutation'}
  if (outer.commandDigest !== commandDigest) return {problem: 'the receipt carries another command digest'}
  if (outer.operation !== operation) return {problem: `the receipt is for ${String(outer.operation)}, not ${operation}`}
  if (outer.scriptName !== expected.scriptName) return {problem: 'the receipt names another script'}
  if (!isTimestamp(outer.createdAt)) return {problem: 'the receipt createdAt is not a timestamp'}
  if (outer.acknowledgedAt !== null && !isTimestamp(outer.acknowledgedAt)) return {problem: 'the receipt acknowledgedAt is not a timestamp'}

  const result = objectWithKeys(outer.result, resultKeys(operation), 'receipt result')
  if (typeof result === 'string') return {problem: result}
  if (result.conflict !== false) return {problem: 'the receipt reports a conflict'}
  const flag = 'revoked' in result ? result.revoked : 'deleted' in result ? result.deleted : true
  if (typeof flag !== 'boolean') return {problem: 'the receipt revoked/deleted flag is not a boolean'}
  const current = result.current as Record<string, unknown>
  const problem = currentProblem(operation, command, current, flag)
  if (problem) return {problem}
  return {current, noop: !flag}
}

function currentProblem(operation: ControlOperation, command: Record<string, unknown>, current: unknown, changed: boolean): string | null {
  const revisionAfter = (base: unknown) => (changed ? Number(base) + 1 : Number(base))
  const revisionProblem = (value: Record<string, unknown>) =>
    value.revision === revisionAfter(command.baseRevision)
      ? null
      : `the receipt revision ${String(value.revision)} is not ${revisionAfter(command.baseRevision)}`
  switch (operation) {
    case 'access_policy.replace':
    case 'access_policy.api_key.rotate':
    case 'access_policy.api_key.revoke': {
      const policy = objectWithKeys(current, POLICY_KEYS, 'receipt policy')
      if (typeof policy === 'string') return policy
      if (!isTimestamp(policy.updated_at)) return 'the receipt policy updated_at is not a timestamp'
      const revision = revisionProblem(policy)
      if (revision) return revision
      if (
        operation === 'access_policy.replace' &&
        (policy.mode !== command.mode || canonicalJson(policy.ip_allowlist) !== canonicalJson(command.ipAllowlist))
      ) {
        return 'the receipt policy is not the one the command set'
      }
      if (operation === 'access_policy.api_key.rotate' && (policy.api_key_last_four !== command.lastFour || policy.api_key_configured !== true)) {
        return 'the receipt does not show the rotated key (last four)'
      }
      if (operation === 'access_policy.api_key.revoke' && policy.api_key_configured !== false) return 'the receipt still shows an API key'
      return null
    }
    case 'runtime_config.replace':
    case 'runtime_config.delete': {
      const entry = objectWithKeys(current, RUNTIME_CONFIG_KEYS, 'receipt runtime config')
      if (typeof entry === 'string') return entry
      if (entry.key !== command.key) return 'the receipt names another runtime-config key'
      if (!isTimestamp(entry.updated_at)) return 'the receipt runtime config updated_at is not a timestamp'
      const revision = revisionProblem(entry)
      if (revision) return revision
      if (operation === 'runtime_config.delete') return entry.valueJson === null && entry.sha256 === null ? null : 'the receipt still shows a value'
      if (typeof entry.valueJson !== 'string' || !canonicalObjectText.safeParse(entry.valueJson).success)
        return 'the receipt valueJson is not canonical JSON of an object'
      if (sha256Hex(entry.valueJson) !== entry.sha256 || entry.sha256 !== command.valueSha256) return 'the receipt value does not hash to the command digest'
      return null
    }
    case 'operation_settings.replace':
    case 'operation_settings.revoke': {
      const settings = objectWithKeys(current, OPERATION_SETTINGS_KEYS, 'receipt operation settings')
      if (typeof settings === 'string') return settings
      if (settings.state !== 'reconciled') return `the receipt operation settings are ${String(settings.state)}, not reconciled`
      if (!isTimestamp(settings.updated_at)) return 'the receipt operation settings updated_at is not a timestamp'
      const revision = revisionProblem(settings)
      if (revision) return revision
      if (operation === 'operation_settings.replace') {
        if (settings.releaseGeneration !== command.releaseGeneration) return 'the receipt names another release generation'
        if (settings.settingsSha256 !== command.settingsSha256) return 'the receipt settings do not hash to the command digest'
      }
      return null
    }
    case 'secrets.put': {
      const secret = objectWithKeys(current, ['name', 'sha256', 'updated_at'], 'receipt secret')
      if (typeof secret === 'string') return secret
      if (secret.name !== command.name || secret.sha256 !== command.valueDigest) return 'the receipt secret is not the one the command put'
      return isTimestamp(secret.updated_at) ? null : 'the receipt secret updated_at is not a timestamp'
    }
    case 'secrets.delete': {
      const deletion = objectWithKeys(current, ['deleted', 'name', 'updated_at'], 'receipt secret deletion')
      if (typeof deletion === 'string') return deletion
      if (deletion.name !== command.name || deletion.deleted !== changed) return 'the receipt deletion is not the one the command asked for'
      return isTimestamp(deletion.updated_at) ? null : 'the receipt deletion updated_at is not a timestamp'
    }
    case 'service_accounts.credentials.put': {
      const account = objectWithKeys(current, ['passwordDigest', 'serviceAccountId', 'updated_at', 'username'], 'receipt credentials')
      if (typeof account === 'string') return account
      if (account.serviceAccountId !== command.serviceAccountId || account.username !== command.username || account.passwordDigest !== command.passwordDigest) {
        return 'the receipt credentials are not the ones the command put'
      }
      return isTimestamp(account.updated_at) ? null : 'the receipt credentials updated_at is not a timestamp'
    }
    case 'service_accounts.credentials.delete': {
      const deletion = objectWithKeys(current, ['deleted', 'serviceAccountId', 'updated_at'], 'receipt credentials deletion')
      if (typeof deletion === 'string') return deletion
      if (deletion.serviceAccountId !== command.serviceAccountId || deletion.deleted !== changed)
        return 'the receipt deletion is not the one the command asked for'
      return isTimestamp(deletion.updated_at) ? null : 'the receipt deletion updated_at is not a timestamp'
    }
  }
}

/** The value as an object with exactly `keys` (sorted), or the problem. */
function objectWithKeys(value: unknown, keys: string[], what: string): Record<string, unknown> | string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return `the ${what} is not an object`
  const actual = Object.keys(value).sort()
  const wanted = [...keys].sort()
  if (canonicalJson(actual) !== canonicalJson(wanted)) return `the ${what} keys are {${actual.join(', ')}}, not {${wanted.join(', ')}}`
  return value as Record<string, unknown>
}

/** An ISO 8601 UTC timestamp as the host writes them. */
function isTimestamp(value: unknown): boolean {
  return typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/.test(value) && !Number.isNaN(Date.parse(value))
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function issueText(what: string, error: z.ZodError): string {
  const issue = error.issues[0]!
  const where = issue.path.length > 0 ? issue.path.join('.') : what
  return `${what}: ${where}: ${issue.code === 'unrecognized_keys' ? `unknown key ${issue.keys.join(', ')}` : issue.message}`
}
