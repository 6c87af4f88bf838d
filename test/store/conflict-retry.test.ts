// A transaction PostgreSQL aborts as a deadlock victim (40P01) is run again, whole, instead of
// failing its caller: two transactions that lock two Workers in opposite order both commit. (The
// store's own transactions never do that — they lock outbox → worker → version — this forces one.)
// On SQLite the write lock serializes them and no deadlock can arise: both commit on the first try.
import {expect, test} from 'vitest'
import {scriptNameFor} from '../../src/store/index.js'
import {describeEachStore} from '../support/stores.js'

describeEachStore('transactions aborted by a store conflict', (t) => {
  test('two transactions locking two Workers in opposite order both commit; the deadlock victim runs again', async () => {
    await t.store.tenants.createCompany({id: 'co', name: 'Co'})
    const workers = []
    for (const name of ['a', 'b']) {
      await t.store.tenants.createDepartment({id: name, company_id: 'co', name})
      workers.push(await t.store.workers.create({company_id: 'co', department_id: name, script_name: scriptNameFor('co', name), status: 'new'}))
    }
    const [a, b] = workers.map((worker) => worker.id) as [string, string]
    // On PostgreSQL the first attempts meet here once each holds its first lock, however late the
    // second starts. On SQLite the second cannot start before the first commits: the first goes on
    // after a moment (the outcome is the same whether the second tried meanwhile or not).
    let arrived = 0
    let meet!: () => void
    const met = new Promise<void>((resolve) => (meet = resolve))
    const attempts: string[] = []
    const lockBoth = (label: string, first: string, second: string) =>
      t.store.transaction(async (tx) => {
        attempts.push(label)
        await tx.workers.setStatus(first, `paused-by-${label}`)
        if (attempts.filter((attempt) => attempt === label).length === 1) {
          if (++arrived === 2) meet()
          await (t.backend === 'postgres' ? met : Promise.race([met, new Promise((resolve) => setTimeout(resolve, 500))]))
        }
        await tx.workers.setStatus(second, `paused-by-${label}`)
      })

    await Promise.all([lockBoth('ab', a, b), lockBoth('ba', b, a)])
    expect(attempts.length).toBe(t.backend === 'postgres' ? 3 : 2)
    // Whichever committed last set both rows: nothing of the aborted attempt remains.
    const statuses = new Set([(await t.store.workers.get(a))!.status, (await t.store.workers.get(b))!.status])
    expect(statuses.size).toBe(1)
  })
})
