// The rules of the control-plane audit that need no host: strict enqueue validation of every
// operation's command, and the receipt rules per operation (the host's real receipts are checked in
// test/control/control.test.ts).
import {describe, expect, test} from 'vitest'
import {sha256Hex} from '../../../src/canonical-json.js'
import {
  commandDigestOf,
  commandOf,
  controlPayloadProblem,
  validateReceipt,
  type ControlOperation,
  type ControlPayload,
} from '../../../src/engine/control/operations.js'
import type {ControlMutation} from '../../../src/provider/types.js'

const SCRIPT = `dw-${'a'.repeat(48)}`
const ACTOR = {type: 'operator', id: 'tester'}
const NOW = '2026-12-01T10:00:00.000Z'

function payloadFor(mutation: ControlMutation): ControlPayload {
  const command = commandOf(mutation)
  return {operation: mutation.operation, command, commandDigest: commandDigestOf(mutation.operation, SCRIPT, command), actor: ACTOR}
}

function withCommand(operation: ControlOperation, command: Record<string, unknown>): ControlPayload {
  return {operation, command, commandDigest: commandDigestOf(operation, SCRIPT, command), actor: ACTOR}
}

describe('strict enqueue validation', () => {
  test('every operation takes exactly its fields; secrets become digests', () => {
    const mutations: ControlMutation[] = [
      {operation: 'access_policy.replace', mode: 'teamsync_internal', ipAllowlist: ['10.0.0.0/8'], baseRevision: 3},
      {operation: 'access_policy.api_key.rotate', apiKeySha256: sha256Hex('key'), apiKeyLastFour: 'abcd', baseRevision: 0},
      {operation: 'access_policy.api_key.revoke', baseRevision: 1},
      {operation: 'runtime_config.replace', key: 'FEATURES', valueJson: '{"a":1}', baseRevision: 0},
      {operation: 'runtime_config.delete', key: 'FEATURES', baseRevision: 1},
      {operation: 'operation_settings.replace', releaseGeneration: 'rg-1', settingsJson: '{"x":{"y":true}}', baseRevision: 0},
      {operation: 'operation_settings.revoke', baseRevision: 1},
      {operation: 'secrets.put', name: 'TOKEN', value: 'the-secret'},
      {operation: 'secrets.delete', name: 'TOKEN'},
      {operation: 'service_accounts.credentials.put', serviceAccountId: 'sa-1', username: 'robot', password: 'the-password'},
      {operation: 'service_accounts.credentials.delete', serviceAccountId: 'sa-1'},
    ]
    for (const mutation of mutations) {
      const payload = payloadFor(mutation)
      expect(controlPayloadProblem(SCRIPT, payload), mutation.operation).toBeNull()
      expect(JSON.stringify(payload)).not.toMatch(/the-secret|the-password/)
    }
    expect(payloadFor(mutations[7]!).command).toEqual({name: 'TOKEN', valueDigest: sha256Hex('the-secret')})
  })

  test('baseRevision is a true integer 0…2^53−1; the four unrevisioned operations carry none', () => {
    for (const baseRevision of [-1, 1.5, 2 ** 53, '1', true, null]) {
      expect(controlPayloadProblem(SCRIPT, withCommand('access_policy.api_key.revoke', {baseRevision})), String(baseRevision)).toMatch(/baseRevision/)
    }
    expect(controlPayloadProblem(SCRIPT, withCommand('access_policy.api_key.revoke', {baseRevision: 2 ** 53 - 1}))).toBeNull()
    expect(controlPayloadProblem(SCRIPT, withCommand('secrets.delete', {name: 'TOKEN', baseRevision: 0}))).toMatch(/unknown key baseRevision/)
  })

  test('refused: extra or missing fields, a plaintext value, a non-canonical or oversized JSON value, a bad digest, a bad script name', () => {
    expect(controlPayloadProblem(SCRIPT, withCommand('secrets.put', {name: 'TOKEN', valueDigest: sha256Hex('v'), value: 'v'}))).toMatch(/unknown key value/)
    expect(controlPayloadProblem(SCRIPT, withCommand('secrets.put', {name: 'TOKEN'}))).toMatch(/valueDigest/)
    const json = '{ "a": 1 }'
    expect(
      controlPayloadProblem(SCRIPT, withCommand('runtime_config.replace', {key: 'K', valueJson: json, valueSha256: sha256Hex(json), baseRevision: 0})),
    ).toMatch(/canonical/)
    const array = '[1]'
    expect(
      controlPayloadProblem(SCRIPT, withCommand('runtime_config.replace', {key: 'K', valueJson: array, valueSha256: sha256Hex(array), baseRevision: 0})),
    ).toMatch(/JSON object/)
    const big = JSON.stringify({v: 'é'.repeat(33_000)})
    expect(
      controlPayloadProblem(SCRIPT, withCommand('runtime_config.replace', {key: 'K', valueJson: big, valueSha256: sha256Hex(big), baseRevision: 0})),
    ).toMatch(/65536 UTF-8 bytes/)
    expect(
      controlPayloadProblem(SCRIPT, withCommand('runtime_config.replace', {key: 'K', valueJson: '{}', valueSha256: sha256Hex('x'), baseRevision: 0})),
    ).toMatch(/SHA-256/)
    expect(controlPayloadProblem(SCRIPT, withCommand('access_policy.replace', {mode: 'public', ipAllowlist: ['10.0.0.1'], baseRevision: 0}))).toMatch(
      /allowlist/,
    )
    const payload = payloadFor({operation: 'secrets.delete', name: 'TOKEN'})
    expect(controlPayloadProblem(SCRIPT, {...payload, commandDigest: sha256Hex('other')})).toBe('commandDigest does not match the command')
    expect(controlPayloadProblem(SCRIPT, {...payload, extra: 1})).toMatch(/unknown key extra/)
    expect(controlPayloadProblem('dw-short', payload)).toMatch(/\^dw-\[0-9a-f\]\{48\}\$/)
  })
})

describe('receipt rules', () => {
  const receiptOf = (payload: ControlPayload, result: Record<string, unknown>) => ({
    mutationId: 'm-1',
    commandDigest: payload.commandDigest,
    operation: payload.operation,
    scriptName: SCRIPT,
    result,
    createdAt: NOW,
    acknowledgedAt: null,
  })
  const check = (payload: ControlPayload, result: Record<string, unknown>) =>
    validateReceipt(receiptOf(payload, result), {mutationId: 'm-1', scriptName: SCRIPT, payload})

  test('secrets: name and digest as the command; a delete that deleted nothing is a no-op', () => {
    const put = payloadFor({operation: 'secrets.put', name: 'TOKEN', value: 'v'})
    expect(check(put, {conflict: false, current: {name: 'TOKEN', sha256: sha256Hex('v'), updated_at: NOW}})).toMatchObject({noop: false})
    expect(check(put, {conflict: false, current: {name: 'TOKEN', sha256: sha256Hex('w'), updated_at: NOW}})).toHaveProperty('problem')
    expect(check(put, {conflict: false, current: {name: 'TOKEN', sha256: sha256Hex('v'), updated_at: 'yesterday'}})).toHaveProperty('problem')
    expect(check(put, {conflict: false, deleted: true, current: {name: 'TOKEN', sha256: sha256Hex('v'), updated_at: NOW}})).toHaveProperty('problem')
    const deletion = payloadFor({operation: 'secrets.delete', name: 'TOKEN'})
    expect(check(deletion, {conflict: false, deleted: false, current: {name: 'TOKEN', deleted: false, updated_at: NOW}})).toMatchObject({noop: true})
    expect(check(deletion, {conflict: false, deleted: true, current: {name: 'TOKEN', deleted: false, updated_at: NOW}})).toHaveProperty('problem')
  })

  test('revokes: base+1, or base+0 when nothing was revoked', () => {
    const revoke = payloadFor({operation: 'operation_settings.revoke', baseRevision: 4})
    const current = (revision: number) => ({state: 'reconciled', releaseGeneration: null, settingsSha256: null, revision, updated_at: NOW})
    expect(check(revoke, {conflict: false, revoked: true, current: current(5)})).toMatchObject({noop: false})
    expect(check(revoke, {conflict: false, revoked: false, current: current(4)})).toMatchObject({noop: true})
    expect(check(revoke, {conflict: false, revoked: false, current: current(5)})).toHaveProperty('problem')
    expect(check(revoke, {conflict: false, revoked: true, current: {...current(5), state: 'pending'}})).toEqual({
      problem: 'the receipt operation settings are pending, not reconciled',
    })
  })

  test('runtime config: canonical, hashing to the command digest; operation settings: the command release', () => {
    const replace = payloadFor({operation: 'runtime_config.replace', key: 'K', valueJson: '{"a":1}', baseRevision: 0})
    const entry = {key: 'K', valueJson: '{"a":1}', sha256: sha256Hex('{"a":1}'), revision: 1, updated_at: NOW}
    expect(check(replace, {conflict: false, current: entry})).toMatchObject({noop: false})
    expect(check(replace, {conflict: false, current: {...entry, valueJson: '{ "a": 1 }', sha256: sha256Hex('{ "a": 1 }')}})).toHaveProperty('problem')
    expect(check(replace, {conflict: false, current: {...entry, sha256: sha256Hex('{"a":2}')}})).toHaveProperty('problem')
    const settings = payloadFor({operation: 'operation_settings.replace', releaseGeneration: 'rg-1', settingsJson: '{}', baseRevision: 0})
    const stored = {state: 'reconciled', releaseGeneration: 'rg-1', settingsSha256: sha256Hex('{}'), revision: 1, updated_at: NOW}
    expect(check(settings, {conflict: false, current: stored})).toMatchObject({noop: false})
    expect(check(settings, {conflict: false, current: {...stored, releaseGeneration: 'rg-2'}})).toEqual({
      problem: 'the receipt names another release generation',
    })
  })

  test('the outer receipt must name this mutation, command and script', () => {
    const put = payloadFor({operation: 'secrets.delete', name: 'TOKEN'})
    const result = {conflict: false, deleted: true, current: {name: 'TOKEN', deleted: true, updated_at: NOW}}
    const good = receiptOf(put, result)
    const expected = {mutationId: 'm-1', scriptName: SCRIPT, payload: put}
    expect(validateReceipt(good, expected)).toMatchObject({noop: false})
    expect(validateReceipt({...good, mutationId: 'm-2'}, expected)).toEqual({problem: 'the receipt names another mutation'})
    expect(validateReceipt({...good, scriptName: `dw-${'b'.repeat(48)}`}, expected)).toEqual({problem: 'the receipt names another script'})
    expect(validateReceipt({...good, operation: 'secrets.put'}, expected)).toHaveProperty('problem')
    expect(validateReceipt({...good, commandDigest: sha256Hex('x')}, expected)).toEqual({problem: 'the receipt carries another command digest'})
    const {acknowledgedAt: _dropped, ...missing} = good
    expect(validateReceipt(missing, expected)).toHaveProperty('problem')
  })
})
