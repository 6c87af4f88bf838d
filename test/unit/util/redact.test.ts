import {expect, test} from 'vitest'
import {isSecretField, REDACTED, redactSecrets} from '../../../src/util/redact.js'

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
