import {expect, test} from 'vitest'
import {AUDIT_ID_CONFLICT, deterministicId, type AuditEntryInput} from '../../src/store/index.js'
import {describeEachStore} from '../support/stores.js'

function retiredEntry(workerId: string, overrides: Partial<AuditEntryInput> = {}): AuditEntryInput {
  return {
    id: deterministicId('department.worker_retired', workerId),
    action: 'department.worker_retired',
    resource_type: 'edge_worker',
    resource_id: workerId,
    actor_type: 'system',
    actor_id: '',
    auth_method: 'system',
    result: 'success',
    facts: {scope: 'onprem:0123456789ab', script_name: `dw-${'a'.repeat(48)}`},
    ...overrides,
  }
}

describeEachStore('audit log', (t) => {
  test('replaying an entry with the same facts is a no-op reported as duplicate', async () => {
    const first = await t.store.audit.append(retiredEntry('w-1'))
    expect(first.duplicate).toBe(false)
    expect(first.row).toMatchObject({action: 'department.worker_retired', reason_code: null, digest: null, created_at: t.clock.now()})

    t.clock.advance(60_000)
    // Same facts, keys in another order: still the same facts.
    const replay = await t.store.audit.append(retiredEntry('w-1', {facts: {script_name: `dw-${'a'.repeat(48)}`, scope: 'onprem:0123456789ab'}}))
    expect(replay).toEqual({row: first.row, duplicate: true})
    expect(await t.store.audit.list()).toHaveLength(1)
  })

  test('replaying an id with different facts is refused and changes nothing', async () => {
    const {row} = await t.store.audit.append(retiredEntry('w-1'))
    await expect(t.store.audit.append(retiredEntry('w-1', {facts: {scope: 'onprem:ffffffffffff'}}))).rejects.toThrow(AUDIT_ID_CONFLICT)
    await expect(t.store.audit.append(retiredEntry('w-1', {result: 'failure'}))).rejects.toThrow(AUDIT_ID_CONFLICT)
    await expect(t.store.audit.append(retiredEntry('w-1', {reason_code: 'namespace'}))).rejects.toThrow(AUDIT_ID_CONFLICT)
    expect(await t.store.audit.get(row.id)).toEqual(row)
  })

  test('concurrent appends of one id from two connections write one row', async () => {
    const other = await t.open()
    const results = await Promise.all(Array.from({length: 16}, (_, i) => (i % 2 ? other : t.store).audit.append(retiredEntry('w-race'))))
    expect(results.filter((result) => !result.duplicate)).toHaveLength(1)
    expect(await t.store.audit.list()).toHaveLength(1)
  })

  test('list filters by action and resource, newest first', async () => {
    await t.store.audit.append(retiredEntry('w-1'))
    t.clock.advance(1)
    await t.store.audit.append(retiredEntry('w-2'))
    t.clock.advance(1)
    await t.store.audit.append({
      ...retiredEntry('sa-1'),
      id: deterministicId('service_account.deleted', 'sa-1'),
      action: 'service_account.deleted',
      resource_type: 'service_account',
      auth_method: 'department_delete',
    })
    const ids = async (filter: Parameters<typeof t.store.audit.list>[0]) => (await t.store.audit.list(filter)).map((row) => row.resource_id)
    expect(await ids({})).toEqual(['sa-1', 'w-2', 'w-1'])
    expect(await ids({action: 'department.worker_retired'})).toEqual(['w-2', 'w-1'])
    expect(await ids({resourceType: 'edge_worker', resourceId: 'w-1'})).toEqual(['w-1'])
    expect(await ids({limit: 1})).toEqual(['sa-1'])
  })
})

test('deterministic ids are UUID-shaped, stable, and differ when any part differs', () => {
  const id = deterministicId('department.worker_retired', 'w-1')
  expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  expect(deterministicId('department.worker_retired', 'w-1')).toBe(id)
  expect(deterministicId('department.worker_retired', 'w-2')).not.toBe(id)
  // Parts are kept apart: ('ab', 'c') is not ('a', 'bc').
  expect(deterministicId('ab', 'c')).not.toBe(deterministicId('a', 'bc'))
})
