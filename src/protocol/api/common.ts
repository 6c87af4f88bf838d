// Values every part of the management API shares: the version, error codes with their statuses,
// and the schemas of names, digests and identifiers that appear in many bodies.
import {z} from 'zod'

export const API_VERSION = 'v1'

/** The longest a readiness probe may wait for its release to go live (`waitMs`): well under any proxy's idle timeout. */
export const READINESS_WAIT_MAX_MS = 25_000

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
  d1_database_not_found: 404, // the script has no D1 binding of that name
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
  script_not_retired: 409, // a data purge of a script that still runs
  script_not_handed_over: 409, // the script's data is read or replaced only while it is handed over (not run here)
  split_release_missing: 409, // a split keeps a release the script does not hold (neither its current one nor its split's)
  mutation_conflict: 409, // mutationId reused with a different commandDigest
  binding_name_taken: 409,
  assets_missing: 409, // an upload names asset files the host does not hold (send them first) // a secret would shadow a binding of the script, or the reverse
  edge_host_script_retired: 410, // the script is retired; terminal
  pairing_rate_limited: 429, // too many failed pairing attempts from this address; retry-after says when
  request_too_large: 413,
  script_too_large: 413, // decoded modules exceed the limit (5 MiB by default)
  unsupported_media_type: 415,
  script_invalid: 422, // workerd refused the script; the message carries workerd's error
  d1_error: 422, // the SQL failed (nothing of it was applied); the message is D1's
  edge_host_fenced: 423,
  internal_error: 500,
  host_full: 503, // every shard holds its maximum number of scripts
  host_busy: 503, // the host holds as many request bodies as it allows at once; retry shortly
} as const

export type ErrorCode = keyof typeof errorStatus

/** A host refusal while a backup fence is active; the kit also files the deploys it defers under it. */
export const EDGE_HOST_FENCED = 'edge_host_fenced' satisfies ErrorCode

// ── Shared values ───────────────────────────────────────────────────────────────────────────────

export const SCRIPT_NAME_PATTERN = /^dw-[0-9a-f]{48}$/
/** Opaque to the host; the kit sends its 32-hex release generation. */
export const releaseGenerationSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, {
  error: 'must be 1–128 characters of letters, digits, ".", "_", ":" or "-"',
})
const identifierPattern = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/
/** Names of bindings, secrets and Durable Object classes: they become JavaScript property names. */
export const identifierSchema = z.string().regex(identifierPattern, {error: 'must be an identifier of at most 64 characters'})
export const hex64 = z.string().regex(/^[0-9a-f]{64}$/, {error: 'must be 64 lowercase hex characters'})
export const sha256HexSchema = hex64
/** Timestamps on the wire are ISO 8601 strings (UTC). */
export const isoTime = z.string()
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
