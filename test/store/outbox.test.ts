import {expect, test} from 'vitest'
import {backoffDelayMs, nextAttemptAt} from '../../src/engine/retry.js'
import type {OutboxEnqueueInput, Store} from '../../src/store/index.js'
import {describeEachStore, type StoreHarness} from '../support/stores.js'

const SCOPE = 'onprem:0123456789ab'
const OTHER_SCOPE = 'onprem:ba9876543210'
const LEASE_SECONDS = 60

function deployRow(key: string, overrides: Partial<OutboxEnqueueInput> = {}): OutboxEnqueueInput {
  return {operation: 'deploy', dedupe_key: key, dispatch_namespace: SCOPE, worker_id: 'w-1', payload: {key}, ...overrides}
}

/** Enqueues `count` rows, one millisecond apart, in one transaction; returns their ids oldest first. */
async function enqueueMany(t: StoreHarness, count: number): Promise<string[]> {
  return t.store.transaction(async (tx) => {
    const ids: string[] = []
    for (let i = 0; i < count; i++) {
      ids.push((await tx.outbox.enqueue(deployRow(`deploy:${i}`))).row.id)
      t.clock.advance(1)
    }
    return ids
  })
}

function claimOptions(owner: string, limit = 10) {
  return {operation: 'deploy' as const, scope: SCOPE, owner, limit, leaseSeconds: LEASE_SECONDS}
}

describeEachStore('outbox', (t) => {
  test('enqueue creates a pending row due now; the same dedupe key returns it as a duplicate', async () => {
    const first = await t.store.outbox.enqueue(deployRow('deploy:w-1:v-1:0'))
    expect(first.duplicate).toBe(false)
    expect(first.row).toMatchObject({status: 'pending', attempts: 0, next_attempt_at: t.clock.now(), payload: {key: 'deploy:w-1:v-1:0'}})

    t.clock.advance(1_000)
    const again = await t.store.outbox.enqueue(deployRow('deploy:w-1:v-1:0', {payload: {something: 'else'}}))
    expect(again.duplicate).toBe(true)
    expect(again.row).toEqual(first.row)
    expect(await t.store.outbox.list()).toHaveLength(1)
  })

  test('concurrent enqueues of one dedupe key from two connections leave exactly one row', async () => {
    const other = await t.open()
    const attempts = Array.from({length: 24}, (_, i) => (i % 2 === 0 ? t.store : other).outbox.enqueue(deployRow('deploy:race')))
    const results = await Promise.all(attempts)
    expect(results.filter((result) => !result.duplicate)).toHaveLength(1)
    expect(new Set(results.map((result) => result.row.id)).size).toBe(1)
    expect(await t.store.outbox.list({limit: 100})).toHaveLength(1)
  })

  test('claim leases due rows of its operation and scope, oldest first, with a fresh token and no attempt counted', async () => {
    const ids = await enqueueMany(t, 3)
    await t.store.outbox.enqueue(deployRow('other-scope', {dispatch_namespace: OTHER_SCOPE}))
    await t.store.outbox.enqueue(deployRow('cleanup', {operation: 'artifact_cleanup'}))
    await t.store.outbox.enqueue(deployRow('later', {next_attempt_at: t.clock.now() + 10_000}))
    await t.store.outbox.enqueue(deployRow('unscheduled', {next_attempt_at: null}))

    const claimed = await t.store.outbox.claim(claimOptions('runner-a', 2))
    expect(claimed.map((row) => row.id)).toEqual(ids.slice(0, 2))
    for (const row of claimed) {
      expect(row).toMatchObject({status: 'leased', lease_owner: 'runner-a', attempts: 0, lease_expires_at: t.clock.now() + LEASE_SECONDS * 1000})
      expect(row.lease_token).toMatch(/^[0-9a-f-]{36}$/)
    }
    expect((await t.store.outbox.claim(claimOptions('runner-a'))).map((row) => row.id)).toEqual([ids[2]])
    expect(await t.store.outbox.claim(claimOptions('runner-a'))).toEqual([])

    t.clock.advance(10_000)
    expect((await t.store.outbox.claim(claimOptions('runner-a'))).map((row) => row.payload.key)).toEqual(['later'])
  })

  test('two connections claiming at once never get the same row, and together get every row', async () => {
    const ids = await enqueueMany(t, 60)
    const other = await t.open()
    const drain = async (store: Store, owner: string) => {
      const got: string[] = []
      for (;;) {
        const batch = await store.outbox.claim(claimOptions(owner, 7))
        if (batch.length === 0) return got
        got.push(...batch.map((row) => row.id))
      }
    }
    const [a, b] = await Promise.all([drain(t.store, 'runner-a'), drain(other, 'runner-b')])
    expect(a.filter((id) => b.includes(id))).toEqual([])
    expect([...a, ...b].sort()).toEqual([...ids].sort())
  })

  test('an expired lease is reclaimed with a new token; the abandoned lease counted no attempt', async () => {
    await enqueueMany(t, 1)
    const [first] = await t.store.outbox.claim(claimOptions('runner-a'))
    t.clock.advance(LEASE_SECONDS * 1000 - 1)
    expect(await t.store.outbox.claim(claimOptions('runner-b'))).toEqual([])

    t.clock.advance(1)
    const [reclaimed] = await t.store.outbox.claim(claimOptions('runner-b'))
    expect(reclaimed).toMatchObject({id: first!.id, lease_owner: 'runner-b', attempts: 0})
    expect(reclaimed!.lease_token).not.toBe(first!.lease_token)
  })

  test('renewing a lease keeps the row away from other claimers', async () => {
    await enqueueMany(t, 1)
    const [row] = await t.store.outbox.claim(claimOptions('runner-a'))
    t.clock.advance(50_000)
    expect(await t.store.outbox.renewLease(row!.id, row!.lease_token!, {leaseSeconds: LEASE_SECONDS})).toBe(true)
    t.clock.advance(50_000)
    expect(await t.store.outbox.claim(claimOptions('runner-b'))).toEqual([])
    expect((await t.store.outbox.get(row!.id))!.lease_expires_at).toBe(t.clock.now() + 10_000)
  })

  test('a runner that lost its lease can neither settle, renew nor reschedule the row', async () => {
    await enqueueMany(t, 1)
    const [stale] = await t.store.outbox.claim(claimOptions('runner-a'))
    t.clock.advance(LEASE_SECONDS * 1000)
    const [current] = await t.store.outbox.claim(claimOptions('runner-b'))
    const staleToken = stale!.lease_token!

    expect(await t.store.outbox.settle(stale!.id, staleToken, {status: 'completed'})).toBe(false)
    expect(await t.store.outbox.renewLease(stale!.id, staleToken, {leaseSeconds: LEASE_SECONDS})).toBe(false)
    expect(
      await t.store.outbox.retryLater(stale!.id, staleToken, {errorCode: 'x', error: 'x', nextAttemptAt: t.clock.now(), waits: 0, attempted: false}),
    ).toEqual({outcome: 'lease_lost'})
    expect(await t.store.outbox.get(stale!.id)).toEqual(current)

    expect(
      await t.store.outbox.settle(current!.id, current!.lease_token!, {
        status: 'failed',
        errorCode: 'worker_deleted',
        error: 'the Worker row no longer exists',
      }),
    ).toBe(true)
    expect(await t.store.outbox.get(current!.id)).toMatchObject({
      status: 'failed',
      lease_token: null,
      lease_expires_at: null,
      next_attempt_at: null,
      last_error_code: 'worker_deleted',
      last_error: 'the Worker row no longer exists',
    })
    // A settled row is finished: settling it again with the same token matches nothing.
    expect(await t.store.outbox.settle(current!.id, current!.lease_token!, {status: 'completed'})).toBe(false)
  })

  test('leaseById answers acquired, inflight, not_due, terminal, wrong_scope or missing', async () => {
    const lease = {scope: SCOPE, owner: 'deploy-task', leaseSeconds: 90}
    const {row: due} = await t.store.outbox.enqueue(deployRow('due'))
    const {row: later} = await t.store.outbox.enqueue(deployRow('later', {next_attempt_at: t.clock.now() + 5_000}))
    const {row: foreign} = await t.store.outbox.enqueue(deployRow('foreign', {dispatch_namespace: OTHER_SCOPE}))

    const acquired = await t.store.outbox.leaseById(due.id, lease)
    expect(acquired).toMatchObject({disposition: 'acquired', row: {status: 'leased', lease_owner: 'deploy-task', attempts: 0}})
    expect(await t.store.outbox.leaseById(due.id, {...lease, owner: 'another'})).toMatchObject({disposition: 'inflight', row: {lease_owner: 'deploy-task'}})
    expect(await t.store.outbox.leaseById(later.id, lease)).toMatchObject({disposition: 'not_due', row: {status: 'pending'}})
    expect(await t.store.outbox.leaseById(foreign.id, lease)).toMatchObject({disposition: 'wrong_scope', row: {status: 'pending', attempts: 0}})
    expect(await t.store.outbox.leaseById('no-such-row', lease)).toEqual({disposition: 'missing', row: null})

    await t.store.outbox.settle(due.id, acquired.row!.lease_token!, {status: 'completed', attempted: true})
    expect(await t.store.outbox.leaseById(due.id, lease)).toMatchObject({disposition: 'terminal', row: {status: 'completed', attempts: 1}})

    t.clock.advance(90_000)
    const expiredThenTaken = await t.store.outbox.leaseById(later.id, lease)
    expect(expiredThenTaken.disposition).toBe('acquired')
    t.clock.advance(90_000)
    const reacquired = await t.store.outbox.leaseById(later.id, {...lease, owner: 'second'})
    expect(reacquired).toMatchObject({disposition: 'acquired', row: {lease_owner: 'second', attempts: 0}})
    expect(reacquired.row!.lease_token).not.toBe(expiredThenTaken.row!.lease_token)
  })

  test('retryLater walks the backoff ladder with jitter, counting the attempt it reports; at max attempts the row fails and stays visible', async () => {
    const backoff = {ladder_seconds: [10, 20], jitter_ratio: 0.2, max_attempts: 3}
    const store = await t.open(t.settings({backoff}))
    const {row} = await store.outbox.enqueue(deployRow('flaky'))
    const expectedBaseSeconds = [10, 20]
    for (const baseSeconds of expectedBaseSeconds) {
      const [claimed] = await store.outbox.claim(claimOptions('runner'))
      const outcome = await store.outbox.retryLater(row.id, claimed!.lease_token!, {
        errorCode: 'edge_host_5xx',
        error: '503',
        nextAttemptAt: nextAttemptAt(backoff, claimed!.attempts + 1, t.clock.now()),
        waits: 0,
        attempted: true,
      })
      if (outcome.outcome !== 'rescheduled') throw new Error(`expected a reschedule, got ${outcome.outcome}`)
      const delay = outcome.nextAttemptAt - t.clock.now()
      expect(delay).toBeGreaterThanOrEqual(baseSeconds * 800)
      expect(delay).toBeLessThanOrEqual(baseSeconds * 1200)
      expect(await store.outbox.get(row.id)).toMatchObject({
        status: 'pending',
        lease_token: null,
        next_attempt_at: outcome.nextAttemptAt,
        last_error_code: 'edge_host_5xx',
        attempts: claimed!.attempts + 1,
      })
      t.clock.advance(delay - 1)
      expect(await store.outbox.claim(claimOptions('runner'))).toEqual([])
      t.clock.advance(1)
    }
    const [last] = await store.outbox.claim(claimOptions('runner'))
    expect(last!.attempts).toBe(2)
    expect(
      await store.outbox.retryLater(row.id, last!.lease_token!, {
        errorCode: 'edge_host_5xx',
        error: 'still down',
        nextAttemptAt: nextAttemptAt(backoff, last!.attempts + 1, t.clock.now()),
        waits: 0,
        attempted: true,
      }),
    ).toEqual({outcome: 'failed'})
    expect(await store.outbox.list({status: 'failed'})).toMatchObject([{id: row.id, attempts: 3, next_attempt_at: null, last_error: 'still down'}])
    t.clock.advance(86_400_000)
    expect(await store.outbox.claim(claimOptions('runner'))).toEqual([])
  })

  test('list filters by status, operation, error code, scope and Worker, newest first', async () => {
    await t.store.outbox.enqueue(deployRow('a', {worker_id: 'w-a'}))
    t.clock.advance(1)
    await t.store.outbox.enqueue(deployRow('b', {worker_id: 'w-b', last_error_code: 'edge_host_fenced'}))
    t.clock.advance(1)
    await t.store.outbox.enqueue(deployRow('c', {operation: 'control_audit', dispatch_namespace: OTHER_SCOPE}))
    const keys = async (filter: Parameters<Store['outbox']['list']>[0]) => (await t.store.outbox.list(filter)).map((row) => row.dedupe_key)

    expect(await keys({})).toEqual(['c', 'b', 'a'])
    expect(await keys({limit: 2})).toEqual(['c', 'b'])
    expect(await keys({operation: 'deploy'})).toEqual(['b', 'a'])
    expect(await keys({errorCode: 'edge_host_fenced'})).toEqual(['b'])
    expect(await keys({scope: OTHER_SCOPE})).toEqual(['c'])
    expect(await keys({workerId: 'w-a'})).toEqual(['a'])
    expect(await keys({status: 'leased'})).toEqual([])
  })
})

test("the backoff delay repeats the ladder's last step and stays within the jitter ratio", () => {
  const backoff = {ladder_seconds: [5, 15, 30], jitter_ratio: 0.2, max_attempts: 12}
  expect([1, 2, 3, 4, 9].map((attempts) => backoffDelayMs(attempts, backoff, () => 0.5))).toEqual([5_000, 15_000, 30_000, 30_000, 30_000])
  expect(backoffDelayMs(2, backoff, () => 0)).toBe(12_000)
  expect(backoffDelayMs(2, backoff, () => 1)).toBe(18_000)
})
