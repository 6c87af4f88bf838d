import {expect, test} from 'vitest'
import type {OutboxEnqueueInput, PairingInput} from '../../src/store/index.js'
import {describeEachStore} from '../support/stores.js'

const OLD = 'onprem:0123456789ab'
const NEW = 'onprem:ba9876543210'

function pairing(scope: string): PairingInput {
  return {scope, host_url: `http://127.0.0.1/${scope}`, host_fingerprint: scope.slice(7), host_public_key: 'key', shared_secret: `secret-${scope}`}
}

function row(key: string, overrides: Partial<OutboxEnqueueInput> = {}): OutboxEnqueueInput {
  return {operation: 'deploy', dedupe_key: key, dispatch_namespace: OLD, worker_id: 'w-1', payload: {key}, ...overrides}
}

describeEachStore('kit pairings', (t) => {
  test('replacing a pairing ends the old one, moves unfinished rows due at once, and closes the restore gate', async () => {
    await t.store.kit.savePairing(pairing(OLD))
    const waiting = (await t.store.outbox.enqueue(row('waiting', {next_attempt_at: t.clock.now() + 600_000}))).row
    const due = (await t.store.outbox.enqueue(row('due'))).row
    const elsewhere = (await t.store.outbox.enqueue(row('elsewhere', {dispatch_namespace: 'onprem:ffffffffffff', next_attempt_at: t.clock.now() + 600_000})))
      .row
    t.clock.advance(1_000)

    const moved = await t.store.kit.replacePairing(pairing(NEW), OLD, 'host replaced')
    expect(moved).toMatchObject({rows: 2, workers: 0, pairing: {scope: NEW, unpaired_at: null}})
    expect(await t.store.kit.getPairing(OLD)).toMatchObject({unpaired_at: t.clock.now()})
    expect(await t.store.kit.pairingSecret(OLD)).toBeUndefined()
    expect(await t.store.kit.pairingSecret(NEW)).toBe(`secret-${NEW}`)
    expect(await t.store.outbox.get(waiting.id)).toMatchObject({dispatch_namespace: NEW, status: 'pending', next_attempt_at: t.clock.now()})
    // A row already due keeps its place in line.
    expect(await t.store.outbox.get(due.id)).toMatchObject({dispatch_namespace: NEW, next_attempt_at: due.next_attempt_at})
    expect(await t.store.outbox.get(elsewhere.id)).toMatchObject({dispatch_namespace: 'onprem:ffffffffffff', next_attempt_at: elsewhere.next_attempt_at})
    expect(await t.store.kit.getGates(NEW)).toMatchObject({restore_pending: true, reasons: {restore_pending: 'host replaced'}})
  })

  test('a short outbox id finds the ids it may mean, and nothing for text that is no id', async () => {
    const ids = await Promise.all(['a', 'b', 'c'].map(async (key) => (await t.store.outbox.enqueue(row(key))).row.id))
    for (const id of ids) expect(await t.store.outbox.idsWithPrefix(id.slice(0, 8), 10)).toContain(id)
    expect(await t.store.outbox.idsWithPrefix(ids[0]!, 10)).toEqual([ids[0]])
    expect(await t.store.outbox.idsWithPrefix('', 10)).toEqual([])
    expect(await t.store.outbox.idsWithPrefix("x' or 1=1 --", 10)).toEqual([])
    expect(await t.store.outbox.idsWithPrefix('%', 10)).toEqual([])
  })
})
