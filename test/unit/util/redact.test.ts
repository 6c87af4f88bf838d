import {describe, expect, test} from 'vitest'
import {isSecretField, REDACTED, redactSecrets, secretRedactor} from '../../../src/util/redact.js'

test('fields whose names carry secrets are redacted at any depth; digests, fingerprints and other fields stay', () => {
  expect(
    redactSecrets({
      secret: 's',
      apiKey: 'k',
      api_key_last_four: '1234',
      password: 'p',
      passwordDigest: 'd',
      credentials: {username: 'u', password: 'p'},
      Authorization: 'Bearer x',
      sessionToken: 't',
      privateKey: 'pk',
      host_fingerprint: 'f',
      sha256: 'h',
      nothing: null,
      secrets: [{name: 'A', value: 'v'}],
      names: ['token'],
      releaseGeneration: 'rg',
    }),
  ).toEqual({
    secret: REDACTED,
    apiKey: REDACTED,
    api_key_last_four: REDACTED,
    password: REDACTED,
    passwordDigest: 'd',
    credentials: REDACTED,
    Authorization: REDACTED,
    sessionToken: REDACTED,
    privateKey: REDACTED,
    host_fingerprint: 'f',
    sha256: 'h',
    nothing: null,
    secrets: REDACTED,
    names: ['token'],
    releaseGeneration: 'rg',
  })
})

test('a URL keeps no password; other strings are left alone', () => {
  expect(redactSecrets({store: 'postgres://kit:s3cret@db:5432/x', note: 'see https://example.com/a:b@c', plain: 'user:pass@host'})).toEqual({
    store: 'postgres://kit@db:5432/x',
    note: 'see https://example.com/a:b@c',
    plain: 'user:pass@host',
  })
  expect(isSecretField('apiKeySha256')).toBe(false)
  expect(isSecretField('api_key_configured')).toBe(true)
})

describe('secretRedactor', () => {
  test('replaces every value, the longest first where two overlap, regex characters taken literally, then URL passwords', () => {
    const redact = secretRedactor(['a.b*c', 'Secret-42', 'Secret-42-long', 'abc'])
    expect(redact('x a.b*c y axbbc Secret-42-long Secret-42 abc postgres://u:pw@db/x')).toBe(
      'x [redacted] y axbbc [redacted] [redacted] abc postgres://u:[redacted]@db/x',
    )
  })

  test('with no value long enough it is the URL rule alone', () => {
    expect(secretRedactor(['abc'])('abc https://u:pw@h/')).toBe('abc https://u:[redacted]@h/')
  })
})
