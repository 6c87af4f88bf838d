// The recovery republisher lane: which deploy rows it takes and when, the claim's lease (renewed while
// a row waits, the token fencing a stale claimer), quarantine, worker_deleted, the execution gate, batch cap, time budget, and how it counts.
import {afterEach, expect, test, vi} from 'vitest'
import {EXECUTION_FENCED} from '../../../src/engine/gates.js'
import {nextAttemptAt} from '../../../src/engine/retry.js'
import {runPass, type DispatchDeploy, type PassResult} from '../../../src/engine/pass/index.js'
import {PROVIDER_UNAVAILABLE} from '../../../src/engine/provider.js'
import type {OutboxRow} from '../../../src/store/index.js'
import {describeEachStore, type StoreHarness} from '../../support/stores.js'
import {enqueueDeployRow, OWNER, passEngine, recordingDispatch, SCOPE, seedWorker, type SettingsOverrides, type TestEngine} from './support.js'

const recovery = (engine: TestEngine, dispatchDeploy: DispatchDeploy, options: {signal?: AbortSignal} = {}) =>
  runPass(engine, {lanes: ['recovery'], dispatchDeploy, ...options})
const laneOf = (result: PassResult) => result.lanes[0]!
const row = (t: StoreHarness, id: string) => t.store.outbox.get(id) as Promise<OutboxRow>

/** Leases the row as a runner that then dies would: the lease simply runs out. */
async function leaseAsCrashedRunner(t: StoreHarness, id: string, leaseSeconds = 90): Promise<void> {
  const lease = await t.store.outbox.leaseById(id, {scope: SCOPE, owner: 'crashed-runner', leaseSeconds})
  expect(lease.disposition).toBe('acquired')
}

afterEach(() => {
  vi.useRealTimers()
})

describeEachStore('recovery lane', (t) => {
  const engineWith = (settings?: SettingsOverrides) => passEngine(t, {settings})

  test('a row handed to the passes (deploy --no-wait) is dispatched by the next pass at once, in-process, with the task arguments', async () => {
    const engine = await engineWith()
    const seed = await seedWorker(t)
    const enqueued = await enqueueDeployRow(engine, seed)
    expect(enqueued).toMatchObject({status: 'pending', reserved_by: null, attempts: 0})

    const dispatch = recordingDispatch()
    const result = await recovery(engine, dispatch)
    expect(result.status).toBe('ran')
    expect(laneOf(result)).toMatchObject({lane: 'recovery', claimed: 1, completed: 1, retried: 0, failed: 0, uncertain: 0, skipped: 0})
    expect(dispatch.calls).toEqual([
      {outboxId: enqueued.id, companyId: seed.worker.company_id, departmentId: seed.worker.department_id, messageId: enqueued.id},
    ])
    // Published and leased in one statement: held by this runner, due from now.
    expect(dispatch.rowsSeen[0]).toMatchObject({status: 'leased', lease_owner: OWNER, next_attempt_at: t.clock.now()})
    expect(await row(t, enqueued.id)).toMatchObject({status: 'completed'})
  })

  test('a row a waiting deploy reserved is left to it for recovery.dispatch_grace_seconds after enqueue, then recovered as stalled', async () => {
    const engine = await engineWith({recovery: {dispatch_grace_seconds: 120}})
    const enqueued = await enqueueDeployRow(engine, await seedWorker(t), 'deploy-process')
    expect(enqueued).toMatchObject({reserved_by: 'deploy-process', lease_owner: null})
    const dispatch = recordingDispatch()

    expect(laneOf(await recovery(engine, dispatch)).claimed).toBe(0)
    t.clock.advance(119_999)
    expect(laneOf(await recovery(engine, dispatch)).claimed).toBe(0)
    t.clock.advance(1)
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 1, completed: 1})
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual([enqueued.id])
  })

  test('a backoff retry is dispatched once it is due, not before', async () => {
    const engine = await engineWith({backoff: {ladder_seconds: [30], jitter_ratio: 0}})
    const enqueued = await enqueueDeployRow(engine, await seedWorker(t))
    const lease = await engine.store.outbox.leaseById(enqueued.id, {scope: SCOPE, owner: 'earlier-runner', leaseSeconds: 90})
    const retried = await engine.store.outbox.retryLater(enqueued.id, lease.row!.lease_token!, {
      errorCode: 'edge_host_5xx',
      error: 'host answered 503',
      nextAttemptAt: nextAttemptAt(engine.settings.backoff, lease.row!.attempts + 1, t.clock.now()),
      waits: 0,
      attempted: true,
    })
    expect(retried).toEqual({outcome: 'rescheduled', nextAttemptAt: t.clock.now() + 30_000})
    const dueAt = t.clock.now() + 30_000
    const dispatch = recordingDispatch()

    t.clock.advance(dueAt - t.clock.now() - 1)
    expect(laneOf(await recovery(engine, dispatch)).claimed).toBe(0)
    t.clock.advance(1)
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 1, completed: 1})
  })

  test('a row a sweep claimed is leased to it: no other sweep takes it until that lease runs out', async () => {
    const engine = await engineWith()
    const enqueued = await enqueueDeployRow(engine, await seedWorker(t))
    const claim = (owner: string) => t.store.sweeps.claimRecoverableDeployments({scope: SCOPE, owner, limit: 10, graceSeconds: 300, leaseSeconds: 90})
    // An old row, retried before: nothing but the claim's lease keeps other sweeps away once it is due again.
    t.clock.advance(3_600_000)
    await t.exec(`update edge_worker_outbox set attempts = 1 where id = '${enqueued.id}'`)
    const [claimed] = await claim('publisher-a')
    expect(claimed).toMatchObject({status: 'leased', lease_owner: 'publisher-a', lease_expires_at: t.clock.now() + 90_000, attempts: 1, claimed_by: null})
    expect(await claim('publisher-b')).toEqual([])
    t.clock.advance(89_999)
    expect(await claim('publisher-b')).toEqual([])
    // A claimer that neither ran nor renewed the row within its lease has lost it.
    t.clock.advance(1)
    const [taken] = await claim('publisher-b')
    // Neither claim counted an attempt: nobody asked the host.
    expect(taken).toMatchObject({id: enqueued.id, lease_owner: 'publisher-b', attempts: 1})
    expect(taken!.lease_token).not.toBe(claimed!.lease_token)
  })

  test('an expired lease is recovered; a live one is left to its holder', async () => {
    const engine = await engineWith()
    const enqueued = await enqueueDeployRow(engine, await seedWorker(t))
    await leaseAsCrashedRunner(t, enqueued.id, 90)
    const dispatch = recordingDispatch()

    t.clock.advance(89_999)
    expect(laneOf(await recovery(engine, dispatch)).claimed).toBe(0)
    t.clock.advance(1)
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 1, completed: 1})
    expect(dispatch.rowsSeen[0]).toMatchObject({status: 'leased', lease_owner: OWNER})
    // The crashed runner never reached the host: only the run that completed counts.
    expect(await row(t, enqueued.id)).toMatchObject({status: 'completed', attempts: 1})
  })

  test('deferred rows, rows not due and rows of another scope are not taken', async () => {
    const engine = await engineWith()
    const seed = await seedWorker(t)
    const base = {operation: 'deploy' as const, worker_id: seed.worker.id, version_id: seed.version.id, payload: {releaseGeneration: 'rg', baseRevision: 0}}
    await t.store.outbox.enqueue({...base, dedupe_key: 'fenced', dispatch_namespace: SCOPE, status: 'deferred', last_error_code: 'edge_host_fenced'})
    await t.store.outbox.enqueue({...base, dedupe_key: 'later', dispatch_namespace: SCOPE, next_attempt_at: t.clock.now() + 1_000})
    await t.store.outbox.enqueue({...base, dedupe_key: 'other-kit', dispatch_namespace: 'onprem:ba9876543210'})
    const dispatch = recordingDispatch()
    expect(laneOf(await recovery(engine, dispatch)).claimed).toBe(0)
    expect(dispatch.calls).toEqual([])
  })

  test('each claim takes at most recovery.batch_size rows, oldest due first, and the pass drains them all', async () => {
    // One row at a time, so the dispatch order is the claim order.
    const engine = await engineWith({recovery: {batch_size: 2}, reconcile: {deploy_concurrency: 1}})
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      ids.push((await enqueueDeployRow(engine, await seedWorker(t))).id)
      t.clock.advance(1)
    }
    const claims = vi.spyOn(t.store.sweeps, 'claimRecoverableDeployments')
    const dispatch = recordingDispatch()
    const result = await recovery(engine, dispatch)
    const sizes = await Promise.all(claims.mock.results.map(async (claim) => ((await claim.value) as OutboxRow[]).length))
    claims.mockRestore()
    expect(sizes).toEqual([2, 2, 1, 0])
    expect(claims.mock.calls.every(([options]) => options.limit === 2)).toBe(true)
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual(ids)
    expect(laneOf(result)).toMatchObject({claimed: 5, completed: 5})
  })

  test('a stale claimer whose lease ran out loses every write: the lease token is the compare-and-set', async () => {
    const engine = await engineWith()
    const enqueued = await enqueueDeployRow(engine, await seedWorker(t))
    // A claimer leases the row, then stalls.
    const [stale] = await t.store.sweeps.claimRecoverableDeployments({scope: SCOPE, owner: 'stale-claimer', limit: 10, graceSeconds: 0, leaseSeconds: 90})
    expect(stale).toMatchObject({id: enqueued.id, status: 'leased', lease_owner: 'stale-claimer'})
    const dispatch = recordingDispatch()

    // Within its lease nobody else takes it.
    t.clock.advance(89_999)
    expect(laneOf(await recovery(engine, dispatch)).claimed).toBe(0)
    // After it, a newer claim does, and dispatches it.
    t.clock.advance(1)
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 1, completed: 1})

    // The stale claimer wakes up: every write it tries matches nothing.
    const lease = {id: stale!.id, token: stale!.lease_token!}
    expect(await t.store.sweeps.releaseLease(lease.id, lease.token)).toBe(false)
    expect(await t.store.outbox.settle(lease.id, lease.token, {status: 'failed', errorCode: 'x', error: 'x'})).toBe(false)
    expect(await t.store.sweeps.quarantine(lease, {status: 'uncertain', errorCode: 'x', error: 'x', workerId: null, versionId: null})).toBe(false)
    expect(await t.store.sweeps.supersedeLeased([{lease, versionId: stale!.version_id}])).toEqual([])
    expect(await row(t, enqueued.id)).toMatchObject({status: 'completed', last_error_code: null})
  })

  test('a pass that died after claiming leaves its rows leased until the lease runs out, then the next pass runs them', async () => {
    const engine = await engineWith()
    const enqueued = await enqueueDeployRow(engine, await seedWorker(t))
    await t.store.sweeps.claimRecoverableDeployments({scope: SCOPE, owner: 'dead', limit: 10, graceSeconds: 0, leaseSeconds: 90})
    const dispatch = recordingDispatch()
    t.clock.advance(89_999)
    expect(laneOf(await recovery(engine, dispatch)).claimed).toBe(0)
    t.clock.advance(1)
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 1, completed: 1})
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual([enqueued.id])
  })

  test('a row whose task ended in an error keeps its lease for recovery; the rows not started go back at once, uncounted', async () => {
    const engine = await engineWith({reconcile: {deploy_concurrency: 1}})
    const first = await enqueueDeployRow(engine, await seedWorker(t))
    t.clock.advance(1)
    const second = await enqueueDeployRow(engine, await seedWorker(t))
    const dispatch = recordingDispatch(() => {
      throw new Error('the task broke')
    })
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 2, skipped: 2, error: expect.stringMatching(/the task broke/)})
    expect(await row(t, first.id)).toMatchObject({status: 'leased', attempts: 0, lease_owner: OWNER})
    expect(await row(t, second.id)).toMatchObject({status: 'pending', attempts: 0, lease_token: null, next_attempt_at: t.clock.now()})
    // Once the first row's lease runs out, a pass takes it over.
    t.clock.advance(90_000)
    expect(laneOf(await recovery(engine, recordingDispatch()))).toMatchObject({claimed: 2, completed: 2})
  })

  test('a row that comes due again within the pass is handed back by the claim that took it again, its attempt uncounted', async () => {
    // One row per claim, one at a time: the next claim is taken when a row starts.
    const engine = await engineWith({recovery: {batch_size: 1}, reconcile: {deploy_concurrency: 1}})
    const retried = await enqueueDeployRow(engine, await seedWorker(t))
    t.clock.advance(1)
    const other = await enqueueDeployRow(engine, await seedWorker(t))
    const claim = t.store.sweeps.claimRecoverableDeployments.bind(t.store.sweeps)
    const claims = vi.spyOn(t.store.sweeps, 'claimRecoverableDeployments').mockImplementation(async (options) => {
      // By the third claim (when the second row starts) the first row's retry is due.
      if (claims.mock.calls.length === 3) t.clock.advance(600_000)
      return claim(options)
    })
    const dispatch = recordingDispatch((args) =>
      args.outboxId === retried.id
        ? {outcome: 'retry', code: 'edge_host_unreachable', message: 'down', exhausted: false}
        : {outcome: 'completed', versionId: 'v', releaseGeneration: 'rg', scriptName: 's', reconciled: false},
    )
    const lane = laneOf(await recovery(engine, dispatch))
    claims.mockRestore()
    expect(lane).toMatchObject({claimed: 3, retried: 1, completed: 1, skipped: 1})
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual([retried.id, other.id])
    expect(await row(t, retried.id)).toMatchObject({status: 'pending', attempts: 1, lease_token: null, next_attempt_at: t.clock.now()})
  })

  test('rows of a claim waiting to start have their leases renewed: a long batch keeps what it claimed', async () => {
    // A 3 s lease, renewed every second (real time) while the rows wait; one row at a time.
    const engine = await engineWith({deploy: {lease_seconds: 3}, reconcile: {deploy_concurrency: 1}})
    const first = await enqueueDeployRow(engine, await seedWorker(t))
    t.clock.advance(1)
    const second = await enqueueDeployRow(engine, await seedWorker(t))
    let rivalClaims: OutboxRow[] | undefined
    const dispatch = recordingDispatch(async (args) => {
      if (args.outboxId === first.id) {
        // The first row runs long, renewing its own lease as the task does: the store's clock passes the
        // claim's lease, and the pass renews the waiting row's meanwhile.
        t.clock.advance(10_000)
        expect(await t.store.outbox.renewLease(first.id, args.claim!.row.lease_token!, {leaseSeconds: 3})).toBe(true)
        const waitingSince = (await row(t, second.id)).lease_expires_at!
        await vi.waitFor(async () => expect((await row(t, second.id)).lease_expires_at).toBeGreaterThan(waitingSince), {timeout: 5_000, interval: 100})
        rivalClaims = await t.store.sweeps.claimRecoverableDeployments({scope: SCOPE, owner: 'rival', limit: 10, graceSeconds: 0, leaseSeconds: 3})
      }
      return {outcome: 'completed', versionId: 'v', releaseGeneration: 'rg', scriptName: 's', reconciled: false}
    })
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 2, completed: 2})
    // The waiting row's lease was renewed from the moved clock, so the rival found nothing to take.
    expect(rivalClaims).toEqual([])
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual([first.id, second.id])
    expect(await row(t, second.id)).toMatchObject({status: 'completed', attempts: 1})
  })

  test('quarantine: an invalid payload on a row never leased, its version built, settles failed and leaves the Worker alone', async () => {
    const engine = await engineWith()
    const seed = await seedWorker(t)
    const {row: bad} = await t.store.outbox.enqueue(deployRowInput(seed, {releaseGeneration: 'rg', baseRevision: -1}))
    const dispatch = recordingDispatch()
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 1, failed: 1})
    expect(dispatch.calls).toEqual([])
    expect(await row(t, bad.id)).toMatchObject({
      status: 'failed',
      last_error_code: 'deployment_payload_invalid',
      last_error: expect.stringMatching(/baseRevision/),
    })
    expect(await t.store.workers.get(seed.worker.id)).toMatchObject({status: 'new'})
    expect(await t.store.workers.getVersion(seed.version.id)).toMatchObject({state: 'failed'})
    expect(engine.log.messages('warn')).toContain(`Edge Worker deployment quarantined: ${(await row(t, bad.id)).last_error}`)
  })

  test('quarantine: a row the host was asked about before may have reached it — uncertain, its Worker paused, a deployed version never downgraded', async () => {
    const engine = await engineWith()
    const seed = await seedWorker(t, {versionState: 'deployed'})
    const {row: bad} = await t.store.outbox.enqueue(deployRowInput(seed, {releaseGeneration: 'rg', baseRevision: 0, surprise: true}))
    await leaseAsCrashedRunner(t, bad.id)
    // An earlier run asked the host (its attempt counted) before this runner crashed.
    await t.exec(`update edge_worker_outbox set attempts = 1 where id = '${bad.id}'`)
    t.clock.advance(90_000)
    expect(laneOf(await recovery(engine, recordingDispatch()))).toMatchObject({claimed: 1, uncertain: 1})
    expect(await row(t, bad.id)).toMatchObject({status: 'uncertain', last_error_code: 'deployment_payload_invalid'})
    expect(await t.store.workers.get(seed.worker.id)).toMatchObject({status: 'paused'})
    expect(await t.store.workers.getVersion(seed.version.id)).toMatchObject({state: 'deployed'})
  })

  test('quarantine: a row whose version is mid-deploy settles uncertain too', async () => {
    const engine = await engineWith()
    const seed = await seedWorker(t, {versionState: 'deploying'})
    const {row: bad} = await t.store.outbox.enqueue({...deployRowInput(seed, {releaseGeneration: 'rg', baseRevision: 0}), script_name: 'not-a-script'})
    expect(laneOf(await recovery(engine, recordingDispatch()))).toMatchObject({claimed: 1, uncertain: 1})
    expect(await row(t, bad.id)).toMatchObject({status: 'uncertain', last_error: expect.stringMatching(/script name/)})
    expect(await t.store.workers.getVersion(seed.version.id)).toMatchObject({state: 'uncertain'})
  })

  test('a row whose Worker row is gone settles failed worker_deleted, dispatches nothing and writes no audit row', async () => {
    const engine = await engineWith()
    const seed = await seedWorker(t)
    const enqueued = await enqueueDeployRow(engine, seed)
    await t.store.tenants.purgeCompany(seed.worker.company_id)
    const dispatch = recordingDispatch()
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 1, failed: 1})
    expect(dispatch.calls).toEqual([])
    expect(await row(t, enqueued.id)).toMatchObject({status: 'failed', last_error_code: 'worker_deleted', last_error: 'the Worker row no longer exists'})
    expect(await t.store.audit.list({})).toEqual([])
  })

  test('claims nothing while the execution gate is closed: a fence is open, or no provider can be built', async () => {
    const seed = await seedWorker(t)
    const fenced = await engineWith()
    const enqueued = await enqueueDeployRow(fenced, seed)
    await t.store.kit.beginFence({scope: SCOPE, reason: 'backup', ttlSeconds: 600})
    const dispatch = recordingDispatch()
    expect(laneOf(await recovery(fenced, dispatch))).toMatchObject({claimed: 0, skippedReason: EXECUTION_FENCED})

    const unpaired = await passEngine(t, {resolution: {status: 'unavailable', code: 'edge_host_unpaired', message: 'not paired'}})
    expect(laneOf(await recovery(unpaired, dispatch))).toMatchObject({claimed: 0, skippedReason: PROVIDER_UNAVAILABLE})
    expect(dispatch.calls).toEqual([])
    expect(await row(t, enqueued.id)).toEqual(enqueued)
  })

  test('reconcile.deploy_concurrency rows of a batch run at once, never two of one Worker; those of one Worker go oldest first', async () => {
    const engine = await engineWith({reconcile: {deploy_concurrency: 3}})
    const seeds = [await seedWorker(t), await seedWorker(t), await seedWorker(t), await seedWorker(t)]
    // Three rows of the first Worker, then one of each other Worker.
    const ids: string[] = []
    for (const [i, seed] of [seeds[0]!, seeds[0]!, seeds[0]!, ...seeds.slice(1)].entries()) {
      ids.push(
        (await t.store.outbox.enqueue({...deployRowInput(seed, {releaseGeneration: seed.version.release_generation, baseRevision: i}), dedupe_key: `row-${i}`}))
          .row.id,
      )
      t.clock.advance(1)
    }
    const workerOf = new Map(ids.map((id, i) => [id, i < 3 ? seeds[0]!.worker.id : seeds[i - 2]!.worker.id]))
    const running = new Set<string>()
    let mostAtOnce = 0
    let sameWorkerOverlaps = 0
    // The first three calls wait for each other: the lane hangs (test timeout) unless three run at once.
    let releaseFirstThree!: () => void
    const firstThree = new Promise<void>((resolve) => (releaseFirstThree = resolve))
    const dispatch = recordingDispatch(async (args) => {
      const worker = workerOf.get(args.outboxId)!
      if ([...running].some((id) => workerOf.get(id) === worker)) sameWorkerOverlaps++
      running.add(args.outboxId)
      mostAtOnce = Math.max(mostAtOnce, running.size)
      if (dispatch.calls.length === 3) releaseFirstThree()
      if (dispatch.calls.length <= 3) await firstThree
      await new Promise((resolve) => setImmediate(resolve))
      running.delete(args.outboxId)
      return {outcome: 'completed', versionId: 'v', releaseGeneration: 'rg', scriptName: args.outboxId, reconciled: false}
    })
    expect(laneOf(await recovery(engine, dispatch))).toMatchObject({claimed: 6, completed: 6, skipped: 0})
    expect(mostAtOnce).toBe(3)
    expect(sameWorkerOverlaps).toBe(0)
    const calls = dispatch.calls.map((call) => call.outboxId)
    expect(calls.filter((id) => workerOf.get(id) === seeds[0]!.worker.id)).toEqual(ids.slice(0, 3))
    expect([...calls].sort()).toEqual([...ids].sort())
  })

  test('task outcomes are counted; retry_later (the gate closed meanwhile) hands the row back as it was and stops the lane', async () => {
    // One row at a time, so the rows after the closed gate are the ones handed back.
    const engine = await engineWith({backoff: {max_attempts: 1}, reconcile: {deploy_concurrency: 1}})
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      ids.push((await enqueueDeployRow(engine, await seedWorker(t))).id)
      t.clock.advance(1)
    }
    const outcomes = ['uncertain', 'failed', 'retry', 'retry_later', 'completed'] as const
    const dispatch = recordingDispatch((args) => {
      const outcome = outcomes[ids.indexOf(args.outboxId)]!
      if (outcome === 'retry') return {outcome, code: 'edge_host_5xx', message: '503', exhausted: false}
      if (outcome === 'retry_later') return {outcome, message: EXECUTION_FENCED}
      if (outcome === 'completed') return {outcome, versionId: 'v', releaseGeneration: 'rg', scriptName: 's', reconciled: false}
      return {outcome, code: `deploy_${outcome}`, message: outcome}
    })
    const lane = laneOf(await recovery(engine, dispatch))
    // max_attempts 1: the retry is exhausted at once and counts as failed.
    expect(lane).toMatchObject({claimed: 5, completed: 0, retried: 0, failed: 2, uncertain: 1, skipped: 2})
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual(ids.slice(0, 4))
    expect(await row(t, ids[3]!)).toMatchObject({status: 'pending', claimed_by: null, reserved_by: null, next_attempt_at: t.clock.now(), attempts: 0})
    expect(await row(t, ids[4]!)).toMatchObject({status: 'pending', claimed_by: null, reserved_by: null, next_attempt_at: t.clock.now(), attempts: 0})
    expect(engine.log.messages('info')).toContain(`Edge Worker deployment republish deferred: ${EXECUTION_FENCED}`)
  })

  test('the lane stops at reconcile.lane_budget_seconds and hands the rest back, due at once for the next pass', async () => {
    vi.useFakeTimers({toFake: ['performance']})
    const engine = await engineWith({reconcile: {lane_budget_seconds: 5, deploy_concurrency: 1}})
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      ids.push((await enqueueDeployRow(engine, await seedWorker(t))).id)
      t.clock.advance(1)
    }
    const slow = recordingDispatch((args) => {
      vi.advanceTimersByTime(5_000)
      return {outcome: 'completed', versionId: 'v', releaseGeneration: 'rg', scriptName: args.outboxId, reconciled: false}
    })
    expect(laneOf(await recovery(engine, slow))).toMatchObject({claimed: 3, completed: 1, skipped: 2})
    for (const id of ids.slice(1))
      expect(await row(t, id)).toMatchObject({status: 'pending', claimed_by: null, reserved_by: null, next_attempt_at: t.clock.now()})

    const next = recordingDispatch()
    expect(laneOf(await recovery(engine, next))).toMatchObject({claimed: 2, completed: 2})
    expect(next.calls.map((call) => call.outboxId)).toEqual(ids.slice(1))
  })

  test('an aborted pass stops between rows and hands the rest back', async () => {
    const engine = await engineWith({reconcile: {deploy_concurrency: 1}})
    for (let i = 0; i < 3; i++) await enqueueDeployRow(engine, await seedWorker(t))
    const stop = new AbortController()
    const dispatch = recordingDispatch((args) => {
      stop.abort()
      return {outcome: 'completed', versionId: 'v', releaseGeneration: 'rg', scriptName: args.outboxId, reconciled: false}
    })
    expect(laneOf(await recovery(engine, dispatch, {signal: stop.signal}))).toMatchObject({claimed: 3, completed: 1, skipped: 2})
    expect(await t.store.outbox.list({status: 'pending'})).toHaveLength(2)
  })
})

function deployRowInput(seed: Awaited<ReturnType<typeof seedWorker>>, payload: Record<string, string | number | boolean>) {
  return {
    operation: 'deploy' as const,
    dedupe_key: `deploy:${seed.worker.id}:${seed.version.id}:0`,
    dispatch_namespace: SCOPE,
    company_id: seed.worker.company_id,
    department_id: seed.worker.department_id,
    worker_id: seed.worker.id,
    version_id: seed.version.id,
    script_name: seed.worker.script_name,
    payload,
  }
}
