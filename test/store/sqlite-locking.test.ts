// SQLite has one writer at a time. Another process's write lock is waited out; a caller never sees
// SQLITE_BUSY — only, past store.sqlite_busy_timeout_ms, one clear store_unavailable line.
import {mkdtempSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import {afterEach, beforeEach, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore, type Store} from '../../src/store/index.js'

let file: string
let holder: Database.Database
const opened: Store[] = []

async function storeWithBudget(busyBudgetMs: number): Promise<Store> {
  const store = await openStore(settingsSchema.parse({data_dir: path.dirname(file), store: {url: file, sqlite_busy_timeout_ms: busyBudgetMs}}))
  opened.push(store)
  return store
}

function enqueue(store: Store) {
  return store.outbox.enqueue({operation: 'deploy', dedupe_key: 'deploy:locked', dispatch_namespace: 'onprem:0123456789ab', payload: {}})
}

beforeEach(async () => {
  file = path.join(mkdtempSync(path.join(tmpdir(), 'edgeworkers-lock-')), 'kit.sqlite')
  await (await storeWithBudget(5_000)).migrate()
  // Stands in for another process in the middle of a write transaction.
  holder = new Database(file)
  holder.exec('begin immediate')
})

afterEach(async () => {
  if (holder.inTransaction) holder.exec('rollback')
  holder.close()
  await Promise.all(opened.splice(0).map((store) => store.close()))
})

test('a write waits until the other writer commits, then succeeds', async () => {
  const store = await storeWithBudget(5_000)
  const write = enqueue(store)
  setTimeout(() => holder.exec('commit'), 200)
  await expect(write).resolves.toMatchObject({duplicate: false})
})

test('a lock held past the budget fails with store_unavailable naming the setting, not SQLITE_BUSY', async () => {
  const store = await storeWithBudget(300)
  await expect(enqueue(store)).rejects.toMatchObject({
    code: 'store_unavailable',
    message: `SQLite store ${file} stayed locked by another writer for more than 300 ms (store.sqlite_busy_timeout_ms)`,
  })
  holder.exec('rollback')
  await expect(enqueue(store)).resolves.toMatchObject({duplicate: false})
})
