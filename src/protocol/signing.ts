// Request signing between the kit and a paired edge host, and the host identity derivations.
//
// Every management request except `POST /v1/pair` and `GET /v1/identity` carries three headers:
//
//   x-edgeworkers-timestamp   Unix time in whole seconds, decimal
//   x-edgeworkers-nonce       16–64 characters of [A-Za-z0-9_-], unique per request
//   x-edgeworkers-signature   lowercase hex HMAC-SHA256(secret, stringToSign)
//
// where `secret` is the 32 bytes the host returned at pairing (sent as 64 hex; the HMAC key is the
// decoded bytes) and stringToSign is these six lines joined by "\n" (no trailing newline):
//
//   EDGEWORKERS-HMAC-SHA256-V1
//   <METHOD, upper case>
//   <request target exactly as sent on the wire: path plus "?query" if any, e.g. /v1/scripts?limit=10>
//   <timestamp header value>
//   <nonce header value>
//   <lowercase hex SHA-256 of the exact body bytes; of the empty string when there is no body>
//
// The host refuses (401) a request whose timestamp is more than the window (default 300 s) away from
// its clock, whose signature does not match (compared in constant time), or whose nonce it has seen
// within the window. Nonces are persisted, so a host restart does not reopen a replay window.
// Kit-signed data-plane requests use the same scheme and pass the Worker's access policy.
import {createHmac, createPublicKey, randomBytes, timingSafeEqual, verify} from 'node:crypto'
import {sha256Hex} from '../canonical-json.js'

export const SIGNATURE_SCHEME = 'EDGEWORKERS-HMAC-SHA256-V1'
export const TIMESTAMP_HEADER = 'x-edgeworkers-timestamp'
export const NONCE_HEADER = 'x-edgeworkers-nonce'
export const SIGNATURE_HEADER = 'x-edgeworkers-signature'
export const SIGNATURE_HEADERS = [TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER] as const

const NONCE_PATTERN = /^[A-Za-z0-9_-]{16,64}$/
const TIMESTAMP_PATTERN = /^[0-9]{1,12}$/
const SECRET_PATTERN = /^[0-9a-f]{64}$/
const SIGNATURE_PATTERN = /^[0-9a-f]{64}$/

export type Body = Uint8Array | string | undefined

export interface SignedParts {
  method: string
  /** Path plus query, exactly as it appears in the HTTP request line. */
  target: string
  timestamp: string
  nonce: string
  bodySha256: string
}

export function stringToSign(parts: SignedParts): string {
  return [SIGNATURE_SCHEME, parts.method.toUpperCase(), parts.target, parts.timestamp, parts.nonce, parts.bodySha256].join('\n')
}

/** A fresh 32-byte shared secret, hex encoded (the host creates it at pairing). */
export function generateSecret(): string {
  return randomBytes(32).toString('hex')
}

function isSecret(value: string): boolean {
  return SECRET_PATTERN.test(value)
}

function hmacHex(secret: string, message: string): string {
  if (!isSecret(secret)) throw new Error('a pairing secret is 64 lowercase hex characters')
  return createHmac('sha256', Buffer.from(secret, 'hex')).update(message).digest('hex')
}

export interface SignRequestInput {
  secret: string
  method: string
  target: string
  body?: Body
  /** Defaults to now; tests pass a skewed clock. */
  nowMs?: number
  /** Defaults to 16 random bytes, base64url. */
  nonce?: string
}

/** The three signature headers for one request. Send the body bytes that were signed, unchanged. */
export function signRequest(input: SignRequestInput): Record<(typeof SIGNATURE_HEADERS)[number], string> {
  const timestamp = String(Math.floor((input.nowMs ?? Date.now()) / 1000))
  const nonce = input.nonce ?? randomBytes(16).toString('base64url')
  const parts: SignedParts = {method: input.method, target: input.target, timestamp, nonce, bodySha256: sha256Hex(input.body ?? '')}
  return {
    [TIMESTAMP_HEADER]: timestamp,
    [NONCE_HEADER]: nonce,
    [SIGNATURE_HEADER]: hmacHex(input.secret, stringToSign(parts)),
  }
}

/** Remembers nonces until they can no longer pass the clock window. */
export interface NonceLedger {
  /** Records the nonce; false when it was already recorded (a replay). */
  remember(nonce: string, expiresAtSeconds: number): boolean
}

export type SignatureRefusal = 'signature_missing' | 'signature_stale' | 'signature_invalid' | 'signature_replayed'

export type VerifyResult = {ok: true} | {ok: false; code: SignatureRefusal; message: string}

export interface VerifyRequestInput {
  secret: string
  method: string
  target: string
  headers: Record<string, string | string[] | undefined>
  body?: Body
  windowSeconds: number
  nonces: NonceLedger
  nowMs?: number
}

/**
 * What can be checked before the body is read: the three headers are present and well formed and
 * the timestamp is inside the window. A host reads a body only for a request that passed this.
 */
export function checkSignatureHeaders(
  headers: Record<string, string | string[] | undefined>,
  windowSeconds: number,
  nowMs = Date.now(),
): VerifyResult & {parts?: {timestamp: string; nonce: string; signature: string}} {
  const timestamp = singleHeader(headers[TIMESTAMP_HEADER])
  const nonce = singleHeader(headers[NONCE_HEADER])
  const signature = singleHeader(headers[SIGNATURE_HEADER])
  if (timestamp === undefined || nonce === undefined || signature === undefined) {
    return {ok: false, code: 'signature_missing', message: `the request must carry ${SIGNATURE_HEADERS.join(', ')}`}
  }
  if (!TIMESTAMP_PATTERN.test(timestamp) || !NONCE_PATTERN.test(nonce) || !SIGNATURE_PATTERN.test(signature)) {
    return {ok: false, code: 'signature_invalid', message: 'the signature headers are malformed'}
  }
  if (Math.abs(Math.floor(nowMs / 1000) - Number(timestamp)) > windowSeconds) {
    return {ok: false, code: 'signature_stale', message: `the request timestamp is more than ${windowSeconds}s from the host clock`}
  }
  return {ok: true, parts: {timestamp, nonce, signature}}
}

/** Checks a signed request. The nonce is recorded only once the signature is proven valid. */
export function verifyRequest(input: VerifyRequestInput): VerifyResult {
  const checked = checkSignatureHeaders(input.headers, input.windowSeconds, input.nowMs)
  if (!checked.ok) return checked
  const {timestamp, nonce, signature} = checked.parts!
  const parts: SignedParts = {method: input.method, target: input.target, timestamp, nonce, bodySha256: sha256Hex(input.body ?? '')}
  const expected = Buffer.from(hmacHex(input.secret, stringToSign(parts)), 'hex')
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) {
    return {ok: false, code: 'signature_invalid', message: 'the request signature does not match'}
  }
  // A nonce must be kept as long as its timestamp can still pass the window.
  if (!input.nonces.remember(nonce, Number(timestamp) + input.windowSeconds)) {
    return {ok: false, code: 'signature_replayed', message: 'the request nonce was already used'}
  }
  return {ok: true}
}

/** True when the request carries any signature header (data plane: signed means "from the kit"). */
export function hasSignatureHeaders(headers: Record<string, string | string[] | undefined>): boolean {
  return SIGNATURE_HEADERS.some((name) => headers[name] !== undefined)
}

function singleHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? undefined : value
}

// ── Host identity ───────────────────────────────────────────────────────────────────────────────
// The host's Ed25519 public key travels as base64 of its raw 32 bytes.

/** SHA-256 (64 hex) of the raw 32-byte Ed25519 public key. */
export function fingerprintOf(hostPublicKeyBase64: string): string {
  return sha256Hex(Buffer.from(hostPublicKeyBase64, 'base64'))
}

/** The kit scope of a paired host: `onprem:` + the first 12 hex of its key fingerprint. */
export function kitScopeFor(hostPublicKeyBase64: string): string {
  return `onprem:${fingerprintOf(hostPublicKeyBase64).slice(0, 12)}`
}

/**
 * What the host signs with its identity key in the pairing answer (`proof`): the code the kit sent
 * and the secret it received, so the kit can check the answer came from the key it was shown.
 */
export function pairingProofMessage(code: string, secret: string): string {
  return `edgeworkers-pairing-v1\n${code}\n${secret}`
}

/** Checks the pairing answer's `proof` (base64 Ed25519 signature) against the advertised host key. */
export function verifyPairingProof(hostPublicKeyBase64: string, code: string, secret: string, proofBase64: string): boolean {
  const raw = Buffer.from(hostPublicKeyBase64, 'base64')
  if (raw.length !== 32) return false
  const key = createPublicKey({key: {kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url')}, format: 'jwk'})
  return verify(null, Buffer.from(pairingProofMessage(code, secret)), key, Buffer.from(proofBase64, 'base64'))
}
