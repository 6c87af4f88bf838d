import {expect, test} from 'vitest'
import {KitError} from '../../src/errors.js'
import {migrations} from '../../src/store/migrations/index.js'
import {describeEachStore} from '../support/stores.js'

const ALL = Object.keys(migrations)

describeEachStore('migrations', (t) => {
  test('a fresh database has every migration pending; migrate applies them once', async () => {
    const store = await t.open(t.settings({store: {url: await t.freshUrl()}}))
    const before = await store.schemaStatus()
    expect(before).toMatchObject({matches: false, applied: [], pending: ALL, unknown: []})
    expect(before.difference).toBe(`${ALL.length} pending migrations: ${ALL.join(', ')}`)

    expect(await store.migrate()).toEqual(ALL)
    expect(await store.schemaStatus()).toMatchObject({matches: true, difference: 'none', applied: ALL, pending: []})
    expect(await store.migrate()).toEqual([])
  })

  test('a migration applied by a newer build is named, and migrate refuses to run', async () => {
    const url = await t.freshUrl()
    const store = await t.open(t.settings({store: {url}}))
    await store.migrate()
    await t.exec(`insert into kysely_migration (name, timestamp) values ('9999_from_the_future', '2030-01-01T00:00:00.000Z')`, url)

    const status = await store.schemaStatus()
    expect(status).toMatchObject({matches: false, pending: [], unknown: ['9999_from_the_future']})
    expect(status.difference).toBe('1 migration unknown to this build (applied by a newer edgeworkers): 9999_from_the_future')
    const refused = await store.migrate().catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(KitError)
    expect(refused).toMatchObject({code: 'schema_mismatch'})
  })

  test('two stores migrating one fresh database at once apply each migration once', async () => {
    const settings = t.settings({store: {url: await t.freshUrl()}})
    const [first, second] = [await t.open(settings), await t.open(settings)]
    const applied = await Promise.all([first!.migrate(), second!.migrate()])
    expect(applied.flat().sort()).toEqual(ALL)
    expect((await first!.schemaStatus()).matches).toBe(true)
  })
})
