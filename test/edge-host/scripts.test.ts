// Scripts through a real host and real workerd: upload → serve → read back, listing, the data
// plane's fixed answers (404 byte-exact, lockdown, policies), the readiness probe, and bad input.
import {createHash, randomUUID} from 'node:crypto'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {READINESS_WAIT_MAX_MS, type ScriptDetails, type ScriptList} from '../../src/protocol/management-api.js'
import {paths} from '../support/paths.js'
import {signRequest} from '../../src/protocol/signing.js'
import {startTestHost, type HostClient, type HostResponse, type TestHost} from '../support/host.js'
import {fixtureUpload, materializeOversizeFixture, moduleUpload, scriptNameFor, textWorker} from '../support/worker-fixtures.js'

let host: TestHost
let client: HostClient

beforeAll(async () => {
  host = await startTestHost()
  await host.pair()
  client = host.client()
})

afterAll(async () => {
  await host?.stop()
})

/** GET a Worker by path (`/<script>/…`) or, with `viaHost`, by host name (`<script>.<base domain>`). */
async function worker(name: string, pathname = '/', init: {viaHost?: boolean; method?: string; headers?: Record<string, string>} = {}) {
  const url = init.viaHost ? `${host.publicUrl}${pathname}` : `${host.publicUrl}/${name}${pathname}`
  const headers = {...init.headers, ...(init.viaHost ? {host: `${name}.workers.localhost`} : {})}
  const response = await request(url, {method: (init.method ?? 'GET') as 'GET', headers})
  return {status: response.statusCode, headers: response.headers, text: await response.body.text()}
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex')

describe('upload, serve, read back', () => {
  const name = scriptNameFor('scripts/hello')
  const upload = fixtureUpload('hello', {tags: ['department:sales', 'team:a']})
  let details: ScriptDetails

  beforeAll(async () => {
    details = await client.deploy(name, upload)
  })

  test('the upload answer describes what was stored', () => {
    expect(details).toMatchObject({name, state: 'active', releaseGeneration: upload.releaseGeneration, builderPolicy: upload.builderPolicy})
  })

  test('serves by path and by host name, with the same URL inside the Worker', async () => {
    expect(await worker(name, '/a/b?c=1')).toMatchObject({status: 200, text: 'Hello from an Edge Worker! (GET /a/b)\n'})
    expect(await worker(name, '/a/b?c=1', {viaHost: true})).toMatchObject({status: 200, text: 'Hello from an Edge Worker! (GET /a/b)\n'})
    expect(await worker(name, '', {method: 'POST'})).toMatchObject({status: 200, text: 'Hello from an Edge Worker! (POST /)\n'})
  })

  test('reads back generation, module digests, state and tags', async () => {
    const response = await client.call<ScriptDetails>('GET', paths.script(name))
    expect(response.status).toBe(200)
    const source = Buffer.from(upload.modules[0]!.contentBase64, 'base64')
    expect(response.body).toMatchObject({
      name,
      state: 'active',
      releaseGeneration: upload.releaseGeneration,
      liveReleaseGeneration: upload.releaseGeneration,
      tags: ['department:sales', 'team:a'],
      mainModule: 'index.js',
      compatibilityDate: '2026-11-01',
      modules: [{name: 'index.js', type: 'esModule', sha256: sha256(source), size: source.length}],
      lockedDownAt: null,
      retiredAt: null,
    })
  })

  test('an identical upload again changes nothing; a new one replaces the code', async () => {
    const before = (await client.call('GET', paths.inventory)).body.shards as Array<{restarts: number}>
    await client.upload(name, upload)
    expect((await client.call('GET', paths.inventory)).body.shards).toEqual(before)

    const next = fixtureUpload('hello-v2')
    await client.deploy(name, next)
    expect(await worker(name)).toMatchObject({status: 200, text: 'Hello from Edge Workers, version 2!\n'})
    await client.deploy(name, upload)
  })

  test('forwards a UUID request id to the Worker and back; replaces anything else', async () => {
    const id = randomUUID()
    expect((await worker(name, '/', {headers: {'x-request-id': id}})).headers['x-request-id']).toBe(id)
    const replaced = (await worker(name, '/', {headers: {'x-request-id': 'not-a-uuid'}})).headers['x-request-id']
    expect(replaced).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
  })
})

describe('listing', () => {
  test('pages through every script with a cursor', async () => {
    const names = Array.from({length: 5}, (_, index) => scriptNameFor(`scripts/listing-${index}`))
    for (const name of names) await client.call('POST', paths.retire(name))
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const response: HostResponse<ScriptList> = await client.call('GET', paths.listScripts({limit: 2, cursor}))
      expect(response.status).toBe(200)
      expect(response.body.scripts.length).toBeLessThanOrEqual(2)
      seen.push(...response.body.scripts.map((script) => script.name))
      cursor = response.body.nextCursor
      pages++
    } while (cursor !== null)
    expect(seen).toEqual([...seen].sort())
    expect(new Set(seen).size).toBe(seen.length)
    for (const name of names) expect(seen).toContain(name)
    expect(pages).toBe(Math.ceil(seen.length / 2))
  })

  test('refuses a page size over 1000 and a forged cursor', async () => {
    expect((await client.call('GET', paths.listScripts({limit: 1001}))).body).toMatchObject({code: 'invalid_request'})
    expect((await client.call('GET', paths.listScripts({cursor: 'bm9wZQ'}))).body).toMatchObject({code: 'invalid_request'})
  })
})

describe('the 404 of a script the host does not serve', () => {
  const retired = scriptNameFor('scripts/retired')

  beforeAll(async () => {
    await client.deploy(retired, textWorker('soon retired'))
    expect(await worker(retired)).toMatchObject({status: 200, text: 'soon retired'})
    const response = await client.call('POST', paths.retire(retired))
    expect(response.body).toMatchObject({name: retired, state: 'retired'})
  })

  test.each([
    ['unknown, by path', () => ({name: scriptNameFor('scripts/never'), viaHost: false})],
    ['unknown, by host', () => ({name: scriptNameFor('scripts/never'), viaHost: true})],
    ['not a script name', () => ({name: 'favicon.ico', viaHost: false})],
    ['retired, by path', () => ({name: retired, viaHost: false})],
    ['retired, by host', () => ({name: retired, viaHost: true})],
  ])('%s: byte-exact body, no-store, request id', async (_label, target) => {
    const {name, viaHost} = target()
    const id = randomUUID()
    const answer = await worker(name, '/any/path', {viaHost, headers: {'x-request-id': id}})
    expect(answer.status).toBe(404)
    expect(answer.text).toBe(`{"code":"worker_not_found","message":"Worker not found","requestId":"${id}"}`)
    expect(answer.headers['cache-control']).toBe('no-store')
    expect(answer.headers['x-request-id']).toBe(id)
  })

  test('retirement is permanent: uploads are refused with edge_host_script_retired', async () => {
    const response = await client.call('PUT', paths.script(retired), textWorker('back from the dead'))
    expect(response.status).toBe(410)
    expect(response.body).toMatchObject({code: 'edge_host_script_retired'})
    expect((await client.call('POST', paths.retire(retired))).status).toBe(200)
    expect((await client.call('GET', paths.script(retired))).body).toMatchObject({state: 'retired', releaseGeneration: expect.any(String)})
  })
})

describe('lockdown', () => {
  const name = scriptNameFor('scripts/locked')

  beforeAll(async () => {
    await client.deploy(name, textWorker('tenant code'))
    const response = await client.call('POST', paths.lockdown(name))
    expect(response.body).toMatchObject({conflict: false, current: {name, state: 'locked_down'}})
  })

  test('answers 403 worker_retired on every channel, kit-signed included', async () => {
    for (const viaHost of [false, true]) {
      const answer = await worker(name, '/x', {viaHost})
      expect(answer.status).toBe(403)
      expect(answer.text).toBe('{"code":"worker_retired","message":"Forbidden"}')
    }
    const target = `/${name}/x`
    const signed = await request(`${host.publicUrl}${target}`, {headers: signRequest({secret: client.secret, method: 'GET', target})})
    expect(signed.statusCode).toBe(403)
    expect(await signed.body.text()).toBe('{"code":"worker_retired","message":"Forbidden"}')
  })

  test('reads back as locked_down; a redeploy keeps the flag', async () => {
    await client.upload(name, textWorker('new tenant code'))
    const details = await client.call('GET', paths.script(name))
    expect(details.body).toMatchObject({state: 'locked_down', lockedDownAt: expect.any(String)})
    expect((await worker(name)).status).toBe(403)
  })
})

describe('access policies', () => {
  const name = scriptNameFor('scripts/policy')
  const apiKey = 'k3y-for-tests-0123'

  beforeAll(async () => {
    await client.deploy(name, textWorker('behind a policy'))
  })

  const replace = (body: Record<string, unknown>) => client.call('PUT', paths.accessPolicy(name), body)

  test('public by default', async () => {
    expect((await client.call('GET', paths.accessPolicy(name))).body).toMatchObject({mode: 'public', revision: 0, api_key_configured: false})
    expect((await worker(name)).status).toBe(200)
  })

  test('api_key: the host keeps only the digest and compares it', async () => {
    const response = await replace({mode: 'api_key', apiKeySha256: sha256(apiKey), apiKeyLastFour: '0123'})
    expect(response.body).toMatchObject({conflict: false, current: {mode: 'api_key', api_key_configured: true, api_key_last_four: '0123', revision: 1}})
    const denied = await worker(name)
    expect(denied.status).toBe(403)
    expect(denied.text).toBe('{"code":"access_denied","message":"Forbidden"}')
    expect((await worker(name, '/', {headers: {'x-api-key': 'wrong'}})).status).toBe(403)
    expect(await worker(name, '/', {headers: {'x-api-key': apiKey}})).toMatchObject({status: 200, text: 'behind a policy'})
    expect((await worker(name, '/', {headers: {authorization: `Bearer ${apiKey}`}, viaHost: true})).status).toBe(200)
  })

  test('teamsync_internal: only allowlisted client addresses', async () => {
    await replace({mode: 'teamsync_internal', ipAllowlist: ['10.0.0.0/8']})
    expect((await worker(name)).status).toBe(403)
    await replace({mode: 'teamsync_internal', ipAllowlist: ['10.0.0.0/8', '127.0.0.0/8']})
    expect((await worker(name)).status).toBe(200)
    await replace({mode: 'teamsync_internal', ipAllowlist: []})
    expect((await worker(name)).text).toBe('{"code":"access_denied","message":"Forbidden"}')
  })

  test('kit-signed requests pass the policy', async () => {
    const target = `/${name}/internal`
    const signed = await request(`${host.publicUrl}${target}`, {headers: signRequest({secret: client.secret, method: 'GET', target})})
    expect(signed.statusCode).toBe(200)
    expect(await signed.body.text()).toBe('behind a policy')
    const forged = await request(`${host.publicUrl}${target}`, {headers: signRequest({secret: 'ab'.repeat(32), method: 'GET', target})})
    expect(forged.statusCode).toBe(403)
    await forged.body.dump()
  })

  test('a stale base revision is refused; bad policies are refused', async () => {
    const current = (await client.call('GET', paths.accessPolicy(name))).body.revision as number
    expect((await replace({mode: 'public', baseRevision: current - 1})).body).toMatchObject({code: 'policy_revision_conflict'})
    // No key configured (leaving api_key mode dropped it): api_key mode is refused until one is rotated in.
    expect((await replace({mode: 'api_key'})).body).toMatchObject({code: 'api_key_not_configured'})
    expect((await replace({mode: 'public', ipAllowlist: []})).status).toBe(400)
    expect((await replace({mode: 'teamsync_internal', ipAllowlist: ['not-an-ip']})).status).toBe(400)
    expect((await replace({mode: 'public', baseRevision: current})).body).toMatchObject({current: {mode: 'public', revision: current + 1}})
    expect((await worker(name)).status).toBe(200)
  })
})

describe('the readiness probe', () => {
  test('answers 409 script_not_ready until the release generation is live in a running shard', async () => {
    const name = scriptNameFor('scripts/readiness')
    const first = textWorker('first')
    await client.upload(name, first)
    let probe = await client.call('GET', paths.readinessProbe(name, 'some-other-generation'))
    expect(probe.status).toBe(409)
    expect(probe.body.code).toBe('script_not_ready')
    await client.waitLive(name, first.releaseGeneration)
    probe = await client.call('GET', paths.readinessProbe(name, first.releaseGeneration))
    expect(probe.status).toBe(200)
    expect(probe.body).toMatchObject({mode: 'public'})
    expect((await client.call('GET', paths.readinessProbe(scriptNameFor('scripts/nowhere'), 'x'))).status).toBe(404)
  })

  test('with waitMs it answers once the release goes live, and at once for a release the script does not hold', async () => {
    const name = scriptNameFor('scripts/readiness-wait')
    const first = textWorker('waited for')
    await client.upload(name, first)
    // Asked right after the upload, before the swap: the answer is the live release, not a 409.
    const waited = await client.call('GET', paths.readinessProbe(name, first.releaseGeneration, READINESS_WAIT_MAX_MS))
    expect(waited.status).toBe(200)
    expect((await worker(name)).text).toBe('waited for')
    // Another release will never go live while the script holds this one: no wait.
    const replaced = await client.call('GET', paths.readinessProbe(name, 'some-other-generation', READINESS_WAIT_MAX_MS))
    expect(replaced.status).toBe(409)
    expect(replaced.body.code).toBe('script_not_ready')
    for (const waitMs of ['soon', '-1', '1.5', String(READINESS_WAIT_MAX_MS + 1)]) {
      const refused = await client.call('GET', `${paths.readinessProbe(name, first.releaseGeneration)}&waitMs=${waitMs}`)
      expect(refused.status).toBe(400)
      expect(refused.body.code).toBe('invalid_request')
    }
  })
})

describe('bad input: refused with a clear code, nothing written, nothing disturbed', () => {
  const neighbour = scriptNameFor('scripts/neighbour')
  const target = scriptNameFor('scripts/bad-input')

  beforeAll(async () => {
    await client.deploy(neighbour, textWorker('neighbour'))
  })

  async function expectUntouched() {
    expect((await client.call('GET', paths.script(target))).body).toMatchObject({code: 'script_not_found'})
    expect(await worker(neighbour)).toMatchObject({status: 200, text: 'neighbour'})
  }

  test('an invalid script name', async () => {
    for (const name of ['dw-XYZ', 'hello', `dw-${'0'.repeat(47)}`, `dw-${'A'.repeat(48)}`]) {
      const response = await client.call('PUT', paths.script(name), textWorker('x'))
      expect(response.status).toBe(400)
      expect(response.body.code).toBe('invalid_script_name')
    }
  })

  test('modules over 5 MiB', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-oversize-'))
    try {
      const response = await client.call('PUT', paths.script(target), fixtureUpload(materializeOversizeFixture(path.join(dir, 'oversize'))))
      expect(response.status).toBe(413)
      expect(response.body.code).toBe('script_too_large')
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
    await expectUntouched()
  })

  test('malformed JSON, a non-JSON body, a schema violation', async () => {
    const malformed = await client.call('PUT', paths.script(target), undefined, {
      rawBody: '{"releaseGeneration": "x",',
      headers: {'content-type': 'application/json'},
    })
    expect(malformed.status).toBe(400)
    expect(malformed.body.code).toBe('invalid_json')
    const multipart = await client.call('PUT', paths.script(target), undefined, {
      rawBody: '--boundary\r\n',
      headers: {'content-type': 'multipart/form-data; boundary=boundary'},
    })
    expect(multipart.status).toBe(415)
    expect(multipart.body.code).toBe('unsupported_media_type')
    const missingMain = await client.call('PUT', paths.script(target), textWorker('x', {mainModule: 'missing.js'}))
    expect(missingMain.status).toBe(400)
    expect(missingMain.body).toMatchObject({code: 'invalid_request', message: expect.stringContaining('mainModule')})
    const unknownKey = await client.call('PUT', paths.script(target), {...textWorker('x'), extra: true})
    expect(unknownKey.body).toMatchObject({code: 'invalid_request', message: expect.stringContaining('extra')})
    await expectUntouched()
  })

  test("a module that fails to compile is refused with workerd's error; the shard keeps serving", async () => {
    const restartsBefore = (await client.call('GET', paths.inventory)).body.shards
    const response = await client.call('PUT', paths.script(target), fixtureUpload('bad-syntax'))
    expect(response.status).toBe(422)
    expect(response.body.code).toBe('script_invalid')
    expect(response.body.message).toMatch(/SyntaxError/)
    const throwing = await client.call('PUT', paths.script(target), moduleUpload('throw new Error("top-level boom"); export default {}'))
    expect(throwing.status).toBe(422)
    expect(throwing.body.message).toContain('top-level boom')
    expect((await client.call('GET', paths.inventory)).body.shards).toEqual(restartsBefore)
    await expectUntouched()
  })

  test('uploads validated together: each bad one is refused with its own error, the good ones go live', async () => {
    const good = Array.from({length: 6}, (_, index) => ({name: scriptNameFor(`scripts/batch-${index}`), upload: textWorker(`batch ${index}`)}))
    const broken = scriptNameFor('scripts/batch-broken')
    const throwing = scriptNameFor('scripts/batch-throwing')
    const [brokenAnswer, throwingAnswer, ...goodAnswers] = await Promise.all([
      client.call('PUT', paths.script(broken), fixtureUpload('bad-syntax')),
      client.call('PUT', paths.script(throwing), moduleUpload('throw new Error("batch boom"); export default {}')),
      ...good.map(({name, upload}) => client.call('PUT', paths.script(name), upload)),
    ])
    expect(brokenAnswer!.status).toBe(422)
    expect(brokenAnswer!.body.message).toMatch(/SyntaxError/)
    expect(throwingAnswer!.status).toBe(422)
    expect(throwingAnswer!.body.message).toContain('batch boom')
    expect(goodAnswers.map((answer) => answer.status)).toEqual(good.map(() => 200))
    for (const {name, upload} of good) await client.waitLive(name, upload.releaseGeneration)
    for (const [index, {name}] of good.entries()) expect(await worker(name)).toMatchObject({status: 200, text: `batch ${index}`})
    expect((await client.call('GET', paths.script(broken))).status).toBe(404)
    expect((await client.call('GET', paths.script(throwing))).status).toBe(404)
  })

  test('a redeploy that fails to compile leaves the live release serving', async () => {
    const before = await client.call('GET', paths.script(neighbour))
    expect((await client.call('PUT', paths.script(neighbour), fixtureUpload('bad-syntax'))).status).toBe(422)
    expect((await client.call('GET', paths.script(neighbour))).body.releaseGeneration).toBe(before.body.releaseGeneration)
    expect(await worker(neighbour)).toMatchObject({status: 200, text: 'neighbour'})
  })

  test('unknown endpoints and methods', async () => {
    expect((await client.call('GET', '/v1/nothing')).body).toMatchObject({code: 'not_found'})
    expect((await client.call('PATCH', paths.script(target))).body).toMatchObject({code: 'method_not_allowed'})
  })
})
