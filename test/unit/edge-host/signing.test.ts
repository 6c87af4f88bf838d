// The wire signature on its own: the exact string to sign and every verdict of verifyRequest.
import {describe, expect, test} from 'vitest'
import {sha256Hex} from '../../../src/canonical-json.js'
import {
  NONCE_HEADER,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  fingerprintOf,
  generateSecret,
  kitScopeFor,
  signRequest,
  stringToSign,
  verifyRequest,
  type NonceLedger,
} from '../../../src/protocol/signing.js'

function memoryLedger(): NonceLedger {
  const seen = new Set<string>()
  return {remember: (nonce) => (seen.has(nonce) ? false : (seen.add(nonce), true))}
}

const secret = generateSecret()
const now = Date.UTC(2026, 10, 30, 12, 0, 0)

function verify(
  headers: Record<string, string>,
  overrides: {body?: string; target?: string; method?: string; nowMs?: number; secret?: string; nonces?: NonceLedger} = {},
) {
  return verifyRequest({
    secret: overrides.secret ?? secret,
    method: overrides.method ?? 'PUT',
    target: overrides.target ?? '/v1/scripts/x?a=1',
    headers,
    body: overrides.body ?? '{"a":1}',
    windowSeconds: 300,
    nonces: overrides.nonces ?? memoryLedger(),
    nowMs: overrides.nowMs ?? now,
  })
}

describe('request signing', () => {
  const headers = signRequest({secret, method: 'put', target: '/v1/scripts/x?a=1', body: '{"a":1}', nowMs: now, nonce: 'nonce-0123456789abcdef'})

  test('signs method, target, timestamp, nonce and body digest with the documented string', () => {
    expect(headers[TIMESTAMP_HEADER]).toBe(String(now / 1000))
    expect(headers[NONCE_HEADER]).toBe('nonce-0123456789abcdef')
    expect(
      stringToSign({
        method: 'put',
        target: '/v1/scripts/x?a=1',
        timestamp: String(now / 1000),
        nonce: 'nonce-0123456789abcdef',
        bodySha256: sha256Hex('{"a":1}'),
      }),
    ).toBe(`EDGEWORKERS-HMAC-SHA256-V1\nPUT\n/v1/scripts/x?a=1\n${now / 1000}\nnonce-0123456789abcdef\n${sha256Hex('{"a":1}')}`)
    expect(headers[SIGNATURE_HEADER]).toMatch(/^[0-9a-f]{64}$/)
  })

  test('accepts the request it signed, once', () => {
    const nonces = memoryLedger()
    expect(verify(headers, {nonces})).toEqual({ok: true})
    expect(verify(headers, {nonces})).toMatchObject({ok: false, code: 'signature_replayed'})
  })

  test('refuses a changed body, target, method or secret', () => {
    expect(verify(headers, {body: '{"a":2}'})).toMatchObject({ok: false, code: 'signature_invalid'})
    expect(verify(headers, {target: '/v1/scripts/x?a=2'})).toMatchObject({ok: false, code: 'signature_invalid'})
    expect(verify(headers, {method: 'POST'})).toMatchObject({ok: false, code: 'signature_invalid'})
    expect(verify(headers, {secret: generateSecret()})).toMatchObject({ok: false, code: 'signature_invalid'})
  })

  test('refuses timestamps outside the window and missing or malformed headers', () => {
    expect(verify(headers, {nowMs: now + 301_000})).toMatchObject({ok: false, code: 'signature_stale'})
    expect(verify(headers, {nowMs: now - 301_000})).toMatchObject({ok: false, code: 'signature_stale'})
    expect(verify(headers, {nowMs: now + 300_000})).toEqual({ok: true})
    expect(verify({[TIMESTAMP_HEADER]: headers[TIMESTAMP_HEADER], [NONCE_HEADER]: headers[NONCE_HEADER]})).toMatchObject({
      ok: false,
      code: 'signature_missing',
    })
    expect(verify({...headers, [SIGNATURE_HEADER]: 'zz'})).toMatchObject({ok: false, code: 'signature_invalid'})
    expect(verify({...headers, [NONCE_HEADER]: 'short'})).toMatchObject({ok: false, code: 'signature_invalid'})
  })

  test('does not remember the nonce of a request that failed verification', () => {
    const nonces = memoryLedger()
    expect(verify(headers, {nonces, body: 'tampered'})).toMatchObject({code: 'signature_invalid'})
    expect(verify(headers, {nonces})).toEqual({ok: true})
  })

  test('derives fingerprint and kit scope from the raw public key', () => {
    const key = Buffer.alloc(32, 7).toString('base64')
    expect(fingerprintOf(key)).toBe(sha256Hex(Buffer.alloc(32, 7)))
    expect(kitScopeFor(key)).toBe(`onprem:${sha256Hex(Buffer.alloc(32, 7)).slice(0, 12)}`)
  })
})
