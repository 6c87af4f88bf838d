// The deferred republish lane: deploys held back by a backup fence (status `deferred`, last error code
// `edge_host_fenced`) wait while the gate is closed, then go out oldest first with no batch cap; the
// code clears when the dispatch is accepted, and a dispatch not accepted leaves the row deferred.
import {expect, test} from 'vitest'
import {EDGE_HOST_FENCED} from '../../../src/protocol/management-api.js'
import {EXECUTION_FENCED} from '../../../src/engine/gates.js'
import {nextAttemptAt} from '../../../src/engine/retry.js'
import {runPass, type DispatchDeploy, type PassResult} from '../../../src/engine/pass/index.js'
import type {OutboxRow} from '../../../src/store/index.js'
import {describeEachStore, type StoreHarness} from '../../support/stores.js'
import {enqueueDeployRow, OWNER, passEngine, recordingDispatch, SCOPE, seedWorker, type TestEngine} from './support.js'

const deferred = (engine: TestEngine, dispatchDeploy: DispatchDeploy) => runPass(engine, {lanes: ['deferred'], dispatchDeploy})
const laneOf = (result: PassResult) => result.lanes[0]!
const row = (t: StoreHarness, id: string) => t.store.outbox.get(id) as Promise<OutboxRow>

describeEachStore('deferred republish lane', (t) => {
  /** Deploys enqueued inside a fence (as `deploy` does then), one millisecond apart; the fence is still open. */
  async function enqueueFenced(engine: TestEngine, count: number): Promise<{ids: string[]; fenceId: string}> {
    const fence = await t.store.kit.beginFence({scope: SCOPE, reason: 'nightly backup', ttlSeconds: 3_600})
    const ids: string[] = []
    for (let i = 0; i < count; i++) {
      const enqueued = await enqueueDeployRow(engine, await seedWorker(t))
      expect(enqueued).toMatchObject({status: 'deferred', last_error_code: EDGE_HOST_FENCED})
      ids.push(enqueued.id)
      t.clock.advance(1)
    }
    return {ids, fenceId: fence.id}
  }

  test('holds fenced deploys while the fence is open; once it ends dispatches every due one, oldest first, past any batch cap', async () => {
    // One row at a time, so the dispatch order is the claim order.
    const engine = await passEngine(t, {settings: {recovery: {batch_size: 1}, reconcile: {deploy_concurrency: 1}}})
    const {ids, fenceId} = await enqueueFenced(engine, 4)
    const dispatch = recordingDispatch()
    expect(laneOf(await deferred(engine, dispatch))).toMatchObject({claimed: 0, skippedReason: EXECUTION_FENCED})

    await t.store.kit.endFence(fenceId, 'backup done')
    expect(laneOf(await deferred(engine, dispatch))).toMatchObject({claimed: 4, completed: 4})
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual(ids)
    // Accepted: the claim's lease dropped the marker.
    for (const seen of dispatch.rowsSeen) expect(seen).toMatchObject({status: 'leased', last_error_code: null, lease_owner: OWNER})
  })

  test('the recovery lane leaves fenced deploys to this lane', async () => {
    const engine = await passEngine(t)
    const {fenceId} = await enqueueFenced(engine, 1)
    await t.store.kit.endFence(fenceId, 'backup done')
    const dispatch = recordingDispatch()
    expect((await runPass(engine, {lanes: ['recovery'], dispatchDeploy: dispatch})).lanes[0]).toMatchObject({claimed: 0})
    expect(laneOf(await deferred(engine, dispatch))).toMatchObject({claimed: 1, completed: 1})
  })

  test('a fenced deploy pushed back on the backoff ladder waits until it is due', async () => {
    const engine = await passEngine(t)
    const {ids, fenceId} = await enqueueFenced(engine, 1)
    await t.store.kit.endFence(fenceId, 'backup done')
    // The host refused the upload inside a fence: the task retried it as deferred.
    const [claimed] = await t.store.sweeps.claimDeferredDeployments({scope: SCOPE, owner: 'earlier', leaseSeconds: 90})
    const retried = await t.store.outbox.retryLater(ids[0]!, claimed!.lease_token!, {
      errorCode: EDGE_HOST_FENCED,
      error: 'the host is fenced',
      nextAttemptAt: nextAttemptAt(engine.settings.backoff, claimed!.attempts + 1, t.clock.now()),
      waits: 1,
      attempted: true,
      deferred: true,
    })
    const dueAt = (retried as {nextAttemptAt: number}).nextAttemptAt
    const dispatch = recordingDispatch()
    t.clock.advance(dueAt - t.clock.now() - 1)
    expect(laneOf(await deferred(engine, dispatch)).claimed).toBe(0)
    t.clock.advance(1)
    expect(laneOf(await deferred(engine, dispatch))).toMatchObject({claimed: 1, completed: 1})
  })

  test('a claimer that stalls holds the rows for its lease; past it the recovery lane takes them over', async () => {
    const engine = await passEngine(t)
    const {ids, fenceId} = await enqueueFenced(engine, 2)
    await t.store.kit.endFence(fenceId, 'backup done')
    const stale = await t.store.sweeps.claimDeferredDeployments({scope: SCOPE, owner: 'stale', leaseSeconds: 90})
    expect(stale.map((claimed) => claimed.id)).toEqual(ids)
    const dispatch = recordingDispatch()
    expect(laneOf(await deferred(engine, dispatch)).claimed).toBe(0)
    t.clock.advance(89_999)
    expect(laneOf(await runPass(engine, {lanes: ['recovery'], dispatchDeploy: dispatch})).claimed).toBe(0)
    expect(dispatch.calls).toEqual([])
    // An expired lease is the recovery lane's, whichever lane took it.
    t.clock.advance(1)
    const recovered = await runPass(engine, {lanes: ['recovery'], dispatchDeploy: dispatch})
    expect(laneOf(recovered)).toMatchObject({claimed: 2, completed: 2})
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual(ids)
  })

  test('a dispatch that is not accepted (the gate closed after the claim) hands the rows back deferred, with their reason', async () => {
    const engine = await passEngine(t, {settings: {reconcile: {deploy_concurrency: 1}}})
    const {ids, fenceId} = await enqueueFenced(engine, 2)
    await t.store.kit.endFence(fenceId, 'backup done')
    const dispatch = recordingDispatch(() => ({outcome: 'retry_later', message: EXECUTION_FENCED}))
    // The first row goes back deferred and the lane stops; the second, never started, goes back too.
    expect(laneOf(await deferred(engine, dispatch))).toMatchObject({claimed: 2, skipped: 2})
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual([ids[0]])
    for (const id of ids) {
      expect(await row(t, id)).toMatchObject({
        status: 'deferred',
        last_error_code: EDGE_HOST_FENCED,
        lease_token: null,
        attempts: 0,
        next_attempt_at: t.clock.now(),
      })
    }
  })
})
