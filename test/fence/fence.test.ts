// Backup fences end to end on both store backends against a real edge host running real workerd:
// deploys during a fence are deferred and served once it lifts (dispatched exactly once), the gates,
// the bad inputs of begin/end, and the reconcile pass confirming fences the store and host disagree on.
import path from 'node:path'
import {afterAll, afterEach, beforeAll, beforeEach, expect, test} from 'vitest'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {beginFence, endFence, fenceStatus, withFence} from '../../src/engine/fence/lifecycle.js'
import {gatesStatus, setMaintenance} from '../../src/engine/maintenance.js'
import {runPass} from '../../src/engine/pass/index.js'
import {retireDepartment} from '../../src/engine/retire/retire-department.js'
import {KitError} from '../../src/errors.js'
import {OnPremProvider} from '../../src/provider/onprem/client.js'
import {FaultProxy} from '../support/fault-proxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const HELLO = path.join(FIXTURES_DIR, 'hello')

describeEachStore('backup fences', (t) => {
  let host: TestHost
  let proxy: FaultProxy
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost({maxFenceTtlSeconds: 600})
    proxy = await new FaultProxy(() => host.adminUrl).start()
  })
  afterAll(async () => {
    await proxy?.stop()
    await host?.stop()
  })
  beforeEach(async () => {
    proxy.rule = () => ({kind: 'forward'})
    await kit.pair(proxy.url)
  })
  // The host outlives the per-test store wipe: never leave it fenced for the next test.
  afterEach(async () => {
    const provider = await hostProvider()
    const status = await provider.fenceStatus()
    if (status.active) await provider.endFence(status.active.fenceId)
  })

  async function hostProvider(): Promise<OnPremProvider> {
    const pairing = await kit.pair(proxy.url)
    const secret = await t.store.kit.pairingSecret(pairing.scope)
    return new OnPremProvider({baseUrl: host.adminUrl, scope: pairing.scope, secret: secret!, connectTimeoutMs: 5_000, readTimeoutMs: 10_000})
  }

  async function refusal(work: Promise<unknown>): Promise<KitError> {
    const error = await work.then(
      () => undefined,
      (thrown: unknown) => thrown,
    )
    expect(error).toBeInstanceOf(KitError)
    return error as KitError
  }

  const putsOf = (scriptName: string) => proxy.seen.filter((seen) => seen.method === 'PUT' && seen.url.endsWith(`/scripts/${scriptName}`)).length

  test('a deploy during a fence is deferred, then served once the fence ends — dispatched exactly once', async () => {
    const engine = await kit.engine()
    const department = await kit.department()
    const fence = await beginFence(engine, {reason: 'nightly backup', ttlSeconds: 600})
    expect(fence).toMatchObject({state: 'active', reason: 'nightly backup', hostAckedAt: expect.any(String)})
    expect((await (await hostProvider()).fenceStatus()).active?.fenceId).toBe(fence.id)

    const deferred = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
    expect(deferred).toMatchObject({state: 'deferred', code: 'edge_host_fenced'})
    expect(await t.store.outbox.get(deferred.outboxId)).toMatchObject({status: 'deferred', last_error_code: 'edge_host_fenced', attempts: 0})

    // While fenced a pass dispatches nothing: the execution gate holds the deferred and recovery lanes.
    const held = await runPass(engine)
    expect(held.lanes.find((lane) => lane.lane === 'deferred')).toMatchObject({claimed: 0, skippedReason: 'Edge Workers execution is fenced'})
    expect(putsOf(deferred.scriptName)).toBe(0)

    const ended = await endFence(engine, {})
    expect(ended.fence).toMatchObject({id: fence.id, state: 'ended', endReason: 'ended'})
    expect(ended.republish).toMatchObject({claimed: 1, completed: 1})
    expect(await t.store.outbox.get(deferred.outboxId)).toMatchObject({status: 'completed', last_error_code: null})
    const served = await fetch(`${host.publicUrl}/${deferred.scriptName}/`)
    expect(served.status).toBe(200)

    const again = await runPass(engine)
    expect(again.lanes.find((lane) => lane.lane === 'deferred')).toMatchObject({claimed: 0})
    expect(putsOf(deferred.scriptName)).toBe(1)
    const actions = (await t.store.audit.list({resourceId: fence.id})).map((row) => row.action).sort()
    expect(actions).toEqual(['backup_fence.begun', 'backup_fence.ended'])
  })

  test('bad input: TTL out of range, a second begin, unknown or lifted fence ids — one line, nothing changed', async () => {
    const engine = await kit.engine({fence: {max_ttl_seconds: 600}})
    expect(await refusal(beginFence(engine, {reason: 'x', ttlSeconds: 4}))).toMatchObject({
      code: 'usage',
      message: 'fence TTL 4s is out of range: 5–600 seconds (fence.max_ttl_seconds)',
    })
    expect(await refusal(beginFence(engine, {reason: 'x', ttlSeconds: 601}))).toMatchObject({code: 'usage'})
    expect(await refusal(beginFence(engine, {reason: ' ', ttlSeconds: 60}))).toMatchObject({code: 'usage', message: 'a fence needs a reason (--reason)'})
    expect(await refusal(endFence(engine, {}))).toMatchObject({code: 'not_found', message: `no backup fence is open for ${(await kit.pair(proxy.url)).scope}`})
    expect(await refusal(endFence(engine, {fenceId: 'no-such-fence'}))).toMatchObject({code: 'not_found', message: 'backup fence no-such-fence not found'})
    expect(await t.store.kit.listFences((await kit.pair(proxy.url)).scope, 10)).toEqual([])
    expect((await (await hostProvider()).fenceStatus()).active).toBeNull()

    const fence = await beginFence(engine, {reason: 'first', ttlSeconds: 60})
    const second = await refusal(beginFence(engine, {reason: 'second', ttlSeconds: 60}))
    expect(second).toMatchObject({code: 'conflict', reason: 'fence_active'})
    expect(second.message).toContain(`a fence is already open for ${fence.scope}: ${fence.id} (first)`)
    expect((await fenceStatus(engine)).recent).toHaveLength(1)

    await endFence(engine, {fenceId: fence.id})
    const lifted = await refusal(endFence(engine, {fenceId: fence.id}))
    expect(lifted).toMatchObject({code: 'conflict', reason: 'fence_lifted'})
    expect(lifted.message).toMatch(new RegExp(`^backup fence ${fence.id} was already lifted at \\S+ \\(ended\\)$`))
  })

  test('a begin the host refused or may have applied leaves no fence anywhere; an end the host never got leaves the fence in place', async () => {
    const engine = await kit.engine()
    const {scope} = await kit.pair(proxy.url)
    const provider = await hostProvider()
    const isBegin = (request: {method: string; url: string}) => request.method === 'POST' && request.url === '/v1/fence'

    proxy.rule = (request) => (isBegin(request) ? {kind: 'answer', status: 503, body: {code: 'unavailable', message: 'restarting'}} : {kind: 'forward'})
    const refused = await refusal(beginFence(engine, {reason: 'x', ttlSeconds: 60}))
    expect(refused).toMatchObject({code: 'host_error'})
    expect(refused.message).toMatch(/^the edge host did not take the backup fence: .*503.*; no fence is in place$/)
    expect(await t.store.kit.openFence(scope)).toBeUndefined()

    // The host applied the begin but the answer was lost: the kit lifts it there before giving up.
    proxy.rule = (request) => (isBegin(request) ? {kind: 'forward_then_cut'} : {kind: 'forward'})
    const cut = await refusal(beginFence(engine, {reason: 'x', ttlSeconds: 60}))
    expect(cut.message).toContain('; no fence is in place')
    expect(await t.store.kit.openFence(scope)).toBeUndefined()
    expect((await provider.fenceStatus()).active).toBeNull()

    proxy.rule = () => ({kind: 'forward'})
    const fence = await beginFence(engine, {reason: 'x', ttlSeconds: 60})
    proxy.rule = (request) => (request.url.endsWith('/end') ? {kind: 'answer', status: 502, body: {code: 'bad_gateway', message: 'down'}} : {kind: 'forward'})
    const notLifted = await refusal(endFence(engine, {}))
    expect(notLifted.message).toMatch(new RegExp(`^cannot lift backup fence ${fence.id}: .*; it stays in place; the host lifts it by itself at \\S+$`))
    expect(await t.store.kit.openFence(scope)).toMatchObject({id: fence.id, state: 'active'})
    expect((await provider.fenceStatus()).active?.fenceId).toBe(fence.id)
  })

  test('two fence begins at once: exactly one holds the fence', async () => {
    const engines = [await kit.engine(), await kit.engine()]
    const results = await Promise.allSettled(engines.map((engine, i) => beginFence(engine, {reason: `racer ${i}`, ttlSeconds: 60})))
    const won = results.filter((result) => result.status === 'fulfilled')
    expect(won).toHaveLength(1)
    const status = await fenceStatus(engines[0]!)
    expect(status.open?.id).toBe((won[0] as PromiseFulfilledResult<{id: string}>).value.id)
    expect(status.host.active?.fenceId).toBe(status.open?.id)
  })

  test('ack lost: the host holds the fence the store shows requested — a pass records the acknowledgement', async () => {
    const engine = await kit.engine()
    const {scope} = await kit.pair(proxy.url)
    // What a CLI killed between the host's answer and the store's ack leaves behind.
    const row = await t.store.kit.beginFence({scope, reason: 'crashed before ack', ttlSeconds: 60})
    await (await hostProvider()).beginFence({fenceId: row.id, ttlSeconds: 60, reason: 'crashed before ack'})

    const pass = await runPass(engine, {lanes: ['host_reconcile']})
    expect(pass.fences).toEqual([{fenceId: row.id, outcome: 'ack_confirmed'}])
    expect(await t.store.kit.getFence(row.id)).toMatchObject({state: 'active', host_acked_at: expect.any(Number)})
    expect((await t.store.audit.list({resourceId: row.id}))[0]).toMatchObject({
      action: 'backup_fence.confirmed',
      reason_code: 'ack_confirmed',
      actor_type: 'system',
    })
    expect((await runPass(engine, {lanes: ['host_reconcile']})).fences).toEqual([])
  })

  test('the host lifted the fence while the store still shows it: one pass records it and republishes the deferred deploy', async () => {
    const engine = await kit.engine()
    const department = await kit.department()
    const fence = await beginFence(engine, {reason: 'lost end', ttlSeconds: 600})
    const deferred = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
    expect(deferred.state).toBe('deferred')
    // The lift reached the host but the store never heard of it.
    await (await hostProvider()).endFence(fence.id)

    const pass = await runPass(engine)
    expect(pass.fences).toEqual([{fenceId: fence.id, outcome: 'ended_on_host'}])
    expect(pass.lanes.find((lane) => lane.lane === 'deferred')).toMatchObject({claimed: 1, completed: 1})
    expect(await t.store.kit.getFence(fence.id)).toMatchObject({state: 'ended', end_reason: 'ended'})
    expect((await fetch(`${host.publicUrl}/${deferred.scriptName}/`)).status).toBe(200)
  })

  test('a begin that never reached the host is closed once it can no longer be in flight', async () => {
    const engine = await kit.engine()
    const {scope} = await kit.pair(proxy.url)
    const row = await t.store.kit.beginFence({scope, reason: 'never arrived', ttlSeconds: 60})
    expect((await runPass(engine, {lanes: ['host_reconcile']})).fences).toEqual([])
    expect((await t.store.kit.getFence(row.id))!.ended_at).toBeNull()

    t.clock.advance(engine.settings.provider.connect_timeout_ms + engine.settings.provider.read_timeout_ms + 1)
    const pass = await runPass(engine, {lanes: ['host_reconcile']})
    expect(pass.fences).toEqual([{fenceId: row.id, outcome: 'never_acknowledged'}])
    expect(await t.store.kit.openFence(scope)).toBeUndefined()
  })

  test('the host holds a fence the store closed, or never knew: a pass lifts the first and adopts the second', async () => {
    const engine = await kit.engine()
    const {scope} = await kit.pair(proxy.url)
    const provider = await hostProvider()

    const closed = await t.store.kit.beginFence({scope, reason: 'closed in the store', ttlSeconds: 60})
    await provider.beginFence({fenceId: closed.id, ttlSeconds: 60, reason: 'closed in the store'})
    await t.store.kit.endFence(closed.id, 'ended')
    expect((await runPass(engine, {lanes: ['host_reconcile']})).fences).toEqual([{fenceId: closed.id, outcome: 'lifted_on_host'}])
    expect((await provider.fenceStatus()).active).toBeNull()

    await provider.beginFence({fenceId: 'from-an-older-store', ttlSeconds: 60, reason: 'restored store'})
    expect((await runPass(engine, {lanes: ['host_reconcile']})).fences).toEqual([{fenceId: 'from-an-older-store', outcome: 'adopted'}])
    expect(await t.store.kit.openFence(scope)).toMatchObject({id: 'from-an-older-store', state: 'active', reason: 'adopted from the edge host: restored store'})
    const deploy = await deployWorker(engine, {projectDir: HELLO, departmentId: await kit.department(), wait: true})
    expect(deploy).toMatchObject({state: 'deferred', code: 'edge_host_fenced'})
  })

  test('a retirement during a fence waits, and completes once the fence lifts', async () => {
    const engine = await kit.engine()
    const department = await kit.department()
    const deployed = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
    expect(deployed.state).toBe('completed')
    await beginFence(engine, {reason: 'retire waits', ttlSeconds: 600})

    const retired = await retireDepartment(engine, {departmentId: department, companyId: kit.companyId})
    expect(retired.state).toBe('pending')
    expect((await fetch(`${host.publicUrl}/${deployed.scriptName}/`)).status).toBe(200)

    await endFence(engine, {})
    await runPass(engine, {lanes: ['host_reconcile']})
    expect((await fetch(`${host.publicUrl}/${deployed.scriptName}/`)).status).toBe(404)
  })

  test('withFence joins an open fence and leaves it, or begins and always ends its own', async () => {
    const engine = await kit.engine()
    const own = await withFence(engine, {reason: 'own', ttlSeconds: 60}, async (fence) => fence.id)
    expect(await t.store.kit.getFence(own)).toMatchObject({state: 'ended'})

    const failing = withFence(engine, {reason: 'fails', ttlSeconds: 60}, async () => {
      throw new Error('backup failed')
    })
    await expect(failing).rejects.toThrow('backup failed')
    expect((await fenceStatus(engine)).open).toBeNull()

    const outer = await beginFence(engine, {reason: 'outer', ttlSeconds: 60})
    expect(await withFence(engine, {reason: 'inner', ttlSeconds: 60}, async (fence) => fence.id)).toBe(outer.id)
    expect((await fenceStatus(engine)).open?.id).toBe(outer.id)
  })

  test('maintenance and a pending restore refuse new deploys with the reference 409s; nothing is written', async () => {
    const engine = await kit.engine()
    const department = await kit.department()
    const {scope} = await kit.pair(proxy.url)
    const on = await setMaintenance(engine, {on: true, reason: 'store upgrade'})
    expect(on).toMatchObject({scope, maintenance: {on: true, reason: 'store upgrade'}, restorePending: {on: false}})

    const maintenance = await refusal(deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true}))
    expect(maintenance).toMatchObject({code: 'gate_closed', reason: 'edge_workers_maintenance'})
    expect(maintenance.message).toBe('409 edge_workers_maintenance: maintenance is on (store upgrade)')
    expect(await t.store.outbox.list({})).toEqual([])

    await t.store.kit.setGate(scope, 'restore_pending', 'restored from /backups/today')
    await setMaintenance(engine, {on: false})
    const restore = await refusal(deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true}))
    expect(restore).toMatchObject({code: 'gate_closed', reason: 'edge_workers_restore_pending'})
    expect(await t.store.outbox.list({})).toEqual([])

    await t.store.kit.setGate(scope, 'restore_pending', null)
    expect(await gatesStatus(engine)).toMatchObject({maintenance: {on: false}, restorePending: {on: false}, fence: null})
    expect((await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})).state).toBe('completed')
    expect((await t.store.audit.list({resourceId: scope})).map((row) => row.action).sort()).toEqual(['maintenance.disabled', 'maintenance.enabled'])
    expect(await refusal(setMaintenance(engine, {on: true, reason: ''}))).toMatchObject({code: 'usage'})
  })
})
