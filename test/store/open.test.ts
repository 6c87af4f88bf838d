import {existsSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, describe, expect, inject, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {KitError} from '../../src/errors.js'
import {openStore, storeTarget} from '../../src/store/index.js'

const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-open-'))
afterAll(() => rmSync(dataDir, {recursive: true, force: true}))

function settingsFor(url: string, dir = dataDir) {
  return settingsSchema.parse({data_dir: dir, store: {url, connect_timeout_ms: 2_000}})
}

async function openError(url: string): Promise<KitError> {
  const error = await openStore(settingsFor(url)).then(
    async (store) => {
      await store.close()
      throw new Error(`${url} opened`)
    },
    (error: unknown) => error,
  )
  expect(error).toBeInstanceOf(KitError)
  return error as KitError
}

describe('store URLs', () => {
  test('empty means <data_dir>/edgeworkers.sqlite, and the data dir is created', async () => {
    const dir = path.join(dataDir, 'not-yet', 'there')
    const store = await openStore(settingsFor('', dir))
    expect(store.backend).toBe('sqlite')
    expect(store.location).toBe(path.join(dir, 'edgeworkers.sqlite'))
    await store.close()
    expect(existsSync(path.join(dir, 'edgeworkers.sqlite'))).toBe(true)
  })

  test('plain paths and sqlite: URLs are SQLite files; relative ones live in the data dir', () => {
    expect(storeTarget(settingsFor('kit.sqlite'))).toMatchObject({backend: 'sqlite', file: path.join(dataDir, 'kit.sqlite')})
    expect(storeTarget(settingsFor('/var/lib/kit.db'))).toMatchObject({backend: 'sqlite', file: '/var/lib/kit.db'})
    expect(storeTarget(settingsFor('sqlite:kit.sqlite'))).toMatchObject({backend: 'sqlite', file: path.join(dataDir, 'kit.sqlite')})
    expect(storeTarget(settingsFor('sqlite:///var/lib/kit.db'))).toMatchObject({backend: 'sqlite', file: '/var/lib/kit.db'})
    expect(storeTarget(settingsFor('postgresql://u:pw@db.internal/kit'))).toEqual({
      backend: 'postgres',
      url: 'postgresql://u:pw@db.internal/kit',
      location: 'postgresql://u@db.internal/kit',
    })
  })

  test('an unsupported scheme is a configuration error', () => {
    expect(() => storeTarget(settingsFor('mysql://db/kit'))).toThrow(expect.objectContaining({code: 'config_invalid'}))
  })
})

describe('a store that cannot be opened is one clear line', () => {
  test('SQLite file in a directory that does not exist', async () => {
    const file = path.join(dataDir, 'missing-dir', 'kit.sqlite')
    const error = await openError(file)
    expect(error.code).toBe('store_unavailable')
    expect(error.message).toBe(`SQLite store ${file} cannot be opened: Cannot open database because the directory does not exist`)
    expect(existsSync(path.dirname(file))).toBe(false)
  })

  test('SQLite path that is not a database', async () => {
    const file = path.join(dataDir, 'notes.txt')
    writeFileSync(file, 'these are not the pages you are looking for\n'.repeat(100))
    const error = await openError(file)
    expect(error.code).toBe('store_unavailable')
    expect(error.message).toBe(`SQLite store ${file} cannot be opened: file is not a database`)
  })

  test('PostgreSQL server that refuses the connection', async () => {
    const error = await openError('postgres://kit:s3cret-pw@127.0.0.1:1/kit')
    expect(error.code).toBe('store_unavailable')
    expect(error.message).toMatch(/^PostgreSQL store postgres:\/\/kit@127\.0\.0\.1:1\/kit is unavailable: connect ECONNREFUSED 127\.0\.0\.1:1$/)
  })

  test('PostgreSQL with a wrong password names the failure, never the password', async () => {
    const url = new URL(inject('pgAdminUrl'))
    url.password = 'definitely-wrong-pw'
    const error = await openError(url.toString())
    expect(error.code).toBe('store_unavailable')
    expect(error.message).toContain('password authentication failed')
    expect(error.message).not.toContain('definitely-wrong-pw')
    expect(error.message.split('\n')).toHaveLength(1)
  })

  test('PostgreSQL database that does not exist', async () => {
    const url = new URL(inject('pgAdminUrl'))
    url.pathname = '/no_such_database'
    const error = await openError(url.toString())
    expect(error.code).toBe('store_unavailable')
    expect(error.message).toContain('database "no_such_database" does not exist')
  })
})
