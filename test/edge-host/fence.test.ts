// Backup fences on the host: while one is active every mutating call is refused (423) and changes
// nothing, reads and the data plane carry on; a fence lifts itself at its TTL and the host keeps the
// history of lifted fences (ended or expired) for the kit's lost-fence confirmation.
import {afterAll, beforeAll, expect, test} from 'vitest'
import type {Fence, FenceStatus} from '../../src/protocol/management-api.js'
import {paths} from '../support/paths.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {scriptNameFor, textWorker} from '../support/worker-fixtures.js'

let host: TestHost
let client: HostClient
const served = scriptNameFor('fence/served')
const other = scriptNameFor('fence/other')

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 1}, maxFenceTtlSeconds: 600})
  await host.pair()
  client = host.client()
  await client.deploy(served, textWorker('served during the fence'))
})

afterAll(async () => {
  await host?.stop()
})

async function fenceGauge(): Promise<string | undefined> {
  const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
  return /^edgeworkers_host_fence_active (\d)$/m.exec(metrics)?.[1]
}

/** Long enough for the refusals below on a loaded machine (at 2 s they outlasted it), short enough to wait out. */
const SHORT_TTL_SECONDS = 10

test('a fence refuses every mutation until it expires, then lifts itself', async () => {
  const begun = await client.call<Fence>('POST', paths.fence, {fenceId: 'backup-1', ttlSeconds: SHORT_TTL_SECONDS, reason: 'nightly backup'})
  expect(begun.status).toBe(201)
  expect(begun.body).toMatchObject({fenceId: 'backup-1', state: 'active', reason: 'nightly backup', liftedAt: null, liftReason: null})
  expect(await fenceGauge()).toBe('1')

  const refusals = [
    await client.call('PUT', paths.script(other), textWorker('new')),
    await client.call('PUT', paths.script(served), textWorker('changed')),
    await client.call('POST', paths.retire(served)),
    await client.call('POST', paths.lockdown(served)),
    await client.call('PUT', paths.accessPolicy(served), {mode: 'teamsync_internal', ipAllowlist: []}),
    await client.call('PUT', paths.secret(served, 'TOKEN'), {value: 'x'}),
    await client.call('DELETE', paths.secrets(served)),
    await client.call('PUT', paths.serviceAccount(served, 'sa-1'), {username: 'u', password: 'p'}),
    await client.call('DELETE', paths.serviceAccounts(served)),
  ]
  for (const refusal of refusals) {
    expect(refusal.status).toBe(423)
    expect(refusal.body.code).toBe('edge_host_fenced')
  }

  // Nothing changed; reads and the data plane carry on.
  expect((await client.call('GET', paths.script(other))).status).toBe(404)
  expect((await client.call('GET', paths.script(served))).body).toMatchObject({state: 'active'})
  expect((await client.call('GET', paths.accessPolicy(served))).body).toMatchObject({mode: 'public', revision: 0})
  expect((await client.call('GET', paths.secrets(served))).body).toEqual({secrets: []})
  expect(await (await fetch(`${host.publicUrl}/${served}/`)).text()).toBe('served during the fence')

  // Only one fence at a time; the same id again is a no-op.
  expect((await client.call('POST', paths.fence, {fenceId: 'backup-2', ttlSeconds: 60})).body.code).toBe('fence_active')
  expect((await client.call('POST', paths.fence, {fenceId: 'backup-1', ttlSeconds: SHORT_TTL_SECONDS})).status).toBe(200)

  // The TTL passes: the host lifts the fence by itself, as of its expiry time.
  await expect.poll(async () => (await client.call<FenceStatus>('GET', paths.fence)).body.active, {timeout: 60_000, interval: 200}).toBeNull()
  const lifted = (await client.call<Fence>('GET', paths.fenceById('backup-1'))).body
  expect(lifted).toMatchObject({state: 'lifted', liftReason: 'expired'})
  expect(lifted.liftedAt).toBe(lifted.expiresAt)
  expect((await client.call<FenceStatus>('GET', paths.fence)).body.recent[0]).toEqual(lifted)
  expect(await fenceGauge()).toBe('0')

  expect((await client.call('PUT', paths.script(other), textWorker('new'))).status).toBe(200)
  // Ending it late still answers how it was lifted.
  expect((await client.call('POST', paths.fenceEnd('backup-1'))).body).toMatchObject({liftReason: 'expired'})
})

test('a fence ended by the kit records it; its id cannot begin again', async () => {
  expect((await client.call('POST', paths.fence, {fenceId: 'backup-3', ttlSeconds: 300})).status).toBe(201)
  expect((await client.call('POST', paths.retire(other))).status).toBe(423)
  const ended = await client.call<Fence>('POST', paths.fenceEnd('backup-3'))
  expect(ended.body).toMatchObject({fenceId: 'backup-3', state: 'lifted', liftReason: 'ended'})
  expect((await client.call('POST', paths.fenceEnd('backup-3'))).body).toEqual(ended.body)
  expect((await client.call('POST', paths.fence, {fenceId: 'backup-3', ttlSeconds: 300})).body.code).toBe('fence_lifted')
  expect((await client.call('POST', paths.retire(other))).status).toBe(200)
})

test('an active fence survives a host restart', async () => {
  expect((await client.call('POST', paths.fence, {fenceId: 'backup-4', ttlSeconds: 300})).status).toBe(201)
  await host.restart()
  expect((await client.call<FenceStatus>('GET', paths.fence)).body.active).toMatchObject({fenceId: 'backup-4'})
  expect((await client.call('PUT', paths.script(served), textWorker('changed'))).status).toBe(423)
  expect((await client.call('POST', paths.fenceEnd('backup-4'))).status).toBe(200)
})

test('bad fence calls', async () => {
  expect((await client.call('POST', paths.fenceEnd('no-such-fence'))).body.code).toBe('fence_not_found')
  expect((await client.call('GET', paths.fenceById('no-such-fence'))).status).toBe(404)
  const tooLong = await client.call('POST', paths.fence, {fenceId: 'backup-5', ttlSeconds: 601})
  expect(tooLong.status).toBe(400)
  expect(tooLong.body.message).toContain('fence.max_ttl_seconds')
  expect((await client.call('POST', paths.fence, {fenceId: 'bad id!', ttlSeconds: 10})).body.code).toBe('invalid_request')
  expect((await client.call('POST', paths.fence, {fenceId: 'backup-6', ttlSeconds: 0})).body.code).toBe('invalid_request')
})
