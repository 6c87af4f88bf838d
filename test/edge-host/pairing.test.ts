// Identity, pairing and every way a management request is refused — against a real host. A refused
// request must change nothing: each refusal below is an upload that must leave no script behind.
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {hostPairingCode} from '../../src/edge-host/host.js'
import {paths} from '../support/paths.js'
import {fingerprintOf, generateSecret, kitScopeFor, signRequest, verifyPairingProof} from '../../src/protocol/signing.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {scriptNameFor, textWorker} from '../support/worker-fixtures.js'

let host: TestHost
/** The current pairing secret (re-pairing replaces it). */
let secret: string
const client = (key = secret) => host.client(key)

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 1}})
})

afterAll(async () => {
  await host?.stop()
})

async function unsignedJson(method: string, target: string, body?: unknown) {
  const response = await fetch(`${host.adminUrl}${target}`, {
    method,
    headers: body === undefined ? {} : {'content-type': 'application/json'},
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return {status: response.status, body: (await response.json()) as any}
}

const upload = textWorker('should never be stored')
const victim = scriptNameFor('pairing-victim')

async function expectNothingStored() {
  expect((await client().call('GET', paths.script(victim))).body).toMatchObject({code: 'script_not_found'})
}

describe('before pairing', () => {
  test('the identity is public and names the kit scope', async () => {
    const {status, body} = await unsignedJson('GET', paths.identity)
    expect(status).toBe(200)
    expect(body.paired).toBe(false)
    expect(body.fingerprint).toBe(fingerprintOf(body.hostPublicKey))
    expect(body.scope).toBe(kitScopeFor(body.hostPublicKey))
    expect(body.scope).toMatch(/^onprem:[0-9a-f]{12}$/)
    expect(body.publicUrl).toBe(host.publicUrl)
  })

  test('signed calls are refused as unpaired', async () => {
    const response = await client(generateSecret()).call('PUT', paths.script(victim), upload)
    expect(response.status).toBe(401)
    expect(response.body).toMatchObject({code: 'edge_host_unpaired'})
  })

  test('the first start issued a code that `host pairing-code` prints again', () => {
    expect(host.pairingCode).toMatch(/^[0-9A-Z]{4}(-[0-9A-Z]{4}){4}$/)
    expect(hostPairingCode(host.dataDir)).toBe(host.pairingCode)
  })

  test('a wrong code is refused', async () => {
    const {status, body} = await unsignedJson('POST', paths.pair, {code: 'AAAA-BBBB-CCCC-DDDD-EEEE'})
    expect(status).toBe(401)
    expect(body.code).toBe('pairing_code_invalid')
  })
})

describe('pairing', () => {
  test('exchanges the code for a secret, proven by the host key, once', async () => {
    const code = host.pairingCode!
    const pairing = await host.pair()
    secret = pairing.secret
    expect(pairing.secret).toMatch(/^[0-9a-f]{64}$/)
    expect(pairing.scope).toBe(kitScopeFor(pairing.hostPublicKey))
    const again = await unsignedJson('POST', paths.pair, {code})
    expect(again.status).toBe(401)
    expect(() => hostPairingCode(host.dataDir)).toThrow(/already used/)
    expect((await unsignedJson('GET', paths.identity)).body.paired).toBe(true)
  })

  test('the pairing answer carries a proof the kit can check', async () => {
    const code = hostPairingCode(host.dataDir, {rotate: true})
    // Codes are case-insensitive; the proof covers the code exactly as the kit sent it.
    const sent = code.toLowerCase()
    const {status, body} = await unsignedJson('POST', paths.pair, {code: sent})
    expect(status).toBe(200)
    expect(verifyPairingProof(body.hostPublicKey, sent, body.secret, body.proof)).toBe(true)
    expect(verifyPairingProof(body.hostPublicKey, sent, generateSecret(), body.proof)).toBe(false)
    // Re-pairing replaced the secret: the old one no longer works.
    expect((await client().call('GET', paths.inventory)).status).toBe(401)
    secret = body.secret
    expect((await client().call('GET', paths.inventory)).status).toBe(200)
  })
})

describe('refusals of signed calls (401, nothing written)', () => {
  test('unsigned', async () => {
    const response = await client().call('PUT', paths.script(victim), upload, {sign: false})
    expect(response.status).toBe(401)
    expect(response.body).toMatchObject({code: 'signature_missing'})
    await expectNothingStored()
  })

  test('tampered body', async () => {
    const response = await client().call('PUT', paths.script(victim), upload, {signedBody: JSON.stringify(textWorker('something else'))})
    expect(response.status).toBe(401)
    expect(response.body).toMatchObject({code: 'signature_invalid'})
    await expectNothingStored()
  })

  test('tampered path', async () => {
    const headers = signRequest({
      secret,
      method: 'PUT',
      target: paths.script(scriptNameFor('another')),
      body: JSON.stringify(upload),
    })
    const response = await client().call('PUT', paths.script(victim), upload, {sign: false, headers})
    expect(response.status).toBe(401)
    expect(response.body).toMatchObject({code: 'signature_invalid'})
    await expectNothingStored()
  })

  test('stale timestamp', async () => {
    const response = await client().call('PUT', paths.script(victim), upload, {nowMs: Date.now() - 10 * 60_000})
    expect(response.status).toBe(401)
    expect(response.body).toMatchObject({code: 'signature_stale'})
    await expectNothingStored()
  })

  test('wrong secret', async () => {
    const response = await client(generateSecret()).call('PUT', paths.script(victim), upload)
    expect(response.status).toBe(401)
    expect(response.body).toMatchObject({code: 'signature_invalid'})
    await expectNothingStored()
  })

  test('replayed nonce, also after a host restart', async () => {
    const nonce = `replay-${Date.now()}-nonce`
    const retire = paths.retire(scriptNameFor('replayed'))
    expect((await client().call('POST', retire, undefined, {nonce, nowMs: Date.now()})).status).toBe(200)
    const replay = await client().call('POST', retire, undefined, {nonce})
    expect(replay.status).toBe(401)
    expect(replay.body).toMatchObject({code: 'signature_replayed'})

    const uploadNonce = `replay-upload-${Date.now()}`
    await host.restart()
    const afterRestart = await client().call('POST', retire, undefined, {nonce})
    expect(afterRestart.body).toMatchObject({code: 'signature_replayed'})
    const replayedUpload = await client().call('PUT', paths.script(victim), upload, {nonce: uploadNonce})
    expect(replayedUpload.status).toBe(200)
    expect((await client().call('PUT', paths.script(victim), textWorker('second'), {nonce: uploadNonce})).body).toMatchObject({
      code: 'signature_replayed',
    })
    expect((await client().call('GET', paths.script(victim))).body.releaseGeneration).toBe(upload.releaseGeneration)
  })
})
