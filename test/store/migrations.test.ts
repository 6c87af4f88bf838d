import {Migrator} from 'kysely'
import {expect, test} from 'vitest'
import {KitError} from '../../src/errors.js'
import {migrations} from '../../src/store/migrations/index.js'
import {openPostgres} from '../../src/store/postgres/open.js'
import {openSqlite} from '../../src/store/sqlite/open.js'
import {describeEachStore, TestClock, type StoreHarness} from '../support/stores.js'

const ALL = Object.keys(migrations)

/** A new database as the build before `migration` left it: every migration before it applied. Its URL. */
async function databaseBefore(t: StoreHarness, migration: string): Promise<string> {
  const url = await t.freshUrl()
  const settings = t.settings({store: {url}})
  const db = t.backend === 'sqlite' ? openSqlite(url, settings) : await openPostgres(url, settings)
  try {
    const earlier = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < migration))
    const {error} = await new Migrator({db, provider: {getMigrations: async () => earlier}}).migrateToLatest()
    if (error) throw error
  } finally {
    await db.destroy()
  }
  return url
}

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

describeEachStore('migration 0004: the outbox state columns', (t) => {
  const SCOPE = 'onprem:0123456789ab'
  const T = TestClock.START
  /** One outbox row in the old encoding (the columns of version 3). */
  function oldRow(
    id: string,
    row: {status: string; attempts: number; owner?: string; token?: string; expires?: number; next?: number; code?: string; at: number},
  ) {
    const value = (v: string | number | undefined) => (v === undefined ? 'null' : typeof v === 'number' ? String(v) : `'${v}'`)
    const operation = id.startsWith('control') ? 'control_audit' : 'deploy'
    return `insert into edge_worker_outbox (id, operation, status, dedupe_key, dispatch_namespace, payload, attempts, lease_owner, lease_token,
      lease_expires_at, next_attempt_at, last_error_code, created_at, updated_at) values ('${id}', '${operation}', '${row.status}', 'key:${id}', '${SCOPE}', '{}',
      ${row.attempts}, ${value(row.owner)}, ${value(row.token)}, ${value(row.expires)}, ${value(row.next)}, ${value(row.code)}, ${row.at - 60_000}, ${row.at});`
  }

  test('converts every old-shape row, and the sweeps then take each when they took it before', async () => {
    const url = await databaseBefore(t, '0004')
    await t.exec(
      [
        // A sweep stamped a retried row: (lease_owner, next_attempt_at) = (the sweep, its cooldown deadline).
        oldRow('stamped', {status: 'pending', attempts: 1, owner: 'sweep-a', next: T + 15_000, code: 'edge_host_5xx', at: T}),
        // A waiting deploy reserved the row it enqueued.
        oldRow('reserved', {status: 'pending', attempts: 0, owner: 'deploy-process', next: T, at: T}),
        oldRow('fenced', {status: 'pending', attempts: 0, next: T - 1_000, code: 'edge_host_fenced', at: T - 1_000}),
        oldRow('leased', {status: 'leased', attempts: 1, owner: 'runner-a', token: 'tok-a', expires: T + 60_000, next: T - 5_000, at: T - 5_000}),
        oldRow('expired', {status: 'leased', attempts: 1, owner: 'runner-b', token: 'tok-b', expires: T - 30_000, next: T - 120_000, at: T - 120_000}),
        // A sweep stamped an expired lease: its stamp is later than the expiry.
        oldRow('expired-stamped', {status: 'leased', attempts: 1, owner: 'sweep-c', token: 'tok-c', expires: T - 30_000, next: T + 10_000, at: T}),
        oldRow('completed', {status: 'completed', attempts: 1, owner: 'runner-d', at: T - 9_000}),
        oldRow('failed', {status: 'failed', attempts: 3, owner: 'runner-e', code: 'edge_host_5xx', at: T - 9_000}),
        // The ack round stamped a completed control row.
        oldRow('control-ack', {status: 'completed', attempts: 2, owner: 'acker', next: T + 30_000, at: T}),
      ].join('\n'),
      url,
    )
    const store = await t.open(t.settings({store: {url}}))
    expect(await store.migrate()).toEqual([
      '0004_outbox_state_columns',
      '0005_work_indexes',
      '0006_outbox_waits',
      '0007_version_notes',
      '0008_version_split',
      '0009_version_assets',
    ])

    const get = async (id: string) => (await store.outbox.get(id))!
    const none = {claimed_by: null, claim_expires_at: null, reserved_by: null}
    expect(await get('stamped')).toMatchObject({
      status: 'pending',
      claimed_by: 'sweep-a',
      claim_expires_at: T + 15_000,
      reserved_by: null,
      next_attempt_at: T + 15_000,
    })
    expect(await get('reserved')).toMatchObject({status: 'pending', reserved_by: 'deploy-process', lease_owner: null, claimed_by: null})
    expect(await get('fenced')).toMatchObject({status: 'deferred', last_error_code: 'edge_host_fenced', ...none})
    expect(await get('leased')).toMatchObject({status: 'leased', lease_owner: 'runner-a', lease_token: 'tok-a', ...none})
    expect(await get('expired')).toMatchObject({status: 'leased', lease_owner: 'runner-b', ...none})
    expect(await get('expired-stamped')).toMatchObject({status: 'leased', claimed_by: 'sweep-c', claim_expires_at: T + 10_000, reserved_by: null})
    expect(await get('completed')).toMatchObject({status: 'completed', lease_owner: 'runner-d', ...none})
    expect(await get('failed')).toMatchObject({status: 'failed', last_error_code: 'edge_host_5xx', ...none})
    expect(await get('control-ack')).toMatchObject({status: 'completed', claimed_by: 'acker', claim_expires_at: T + 30_000, next_attempt_at: T + 30_000})

    // The new claims lease what they take for longer than this test's clock runs: a row is taken once.
    const recover = async () =>
      (await store.sweeps.claimRecoverableDeployments({scope: SCOPE, owner: 'new', limit: 10, graceSeconds: 300, leaseSeconds: 600}))
        .map((row) => row.id)
        .sort()
    const acks = async () => (await store.controlAudits.claimAcks({scope: SCOPE, owner: 'new', limit: 10, leaseSeconds: 60})).map((row) => row.id)
    // Now: the unstamped expired lease is recovered; the deferred deploy goes to the deferred lane only.
    expect(await recover()).toEqual(['expired'])
    expect((await store.sweeps.claimDeferredDeployments({scope: SCOPE, owner: 'new', leaseSeconds: 600})).map((row) => row.id)).toEqual(['fenced'])
    expect(await acks()).toEqual([])
    // Once the old stamps' cooldowns are over, their rows are taken; the reservation holds for the grace.
    t.clock.advance(15_000)
    expect(await recover()).toEqual(['expired-stamped', 'stamped'])
    t.clock.advance(15_000)
    expect(await acks()).toEqual(['control-ack'])
    // The live lease is taken once it expired; the reservation once the grace since its enqueue (at T - 60 s) has passed.
    t.clock.advance(240_000 - 30_000 - 1)
    expect(await recover()).toEqual(['leased'])
    t.clock.advance(1)
    expect(await recover()).toEqual(['reserved'])
  })
})

describeEachStore('migration 0009: the asset objects each version serves', (t) => {
  // A version from before it names its asset files only inside its bundle: recorded as serving every one (`*`).
  test('a version with assets from before it keeps every asset object; one without keeps none', async () => {
    const url = await databaseBefore(t, '0009')
    const T = TestClock.START
    const version = (id: string, manifest: string) =>
      `insert into edge_worker_versions (id, worker_id, release_generation, builder_policy, state, project_artifact_key, project_digest,
        bundle_artifact_key, bundle_digest, manifest, receipt, created_at, updated_at) values ('${id}', 'w1', 'rg-${id}', 'p', 'deployed', 'k', 'd', 'k', 'd',
        '${manifest}', '{}', ${T}, ${T});`
    await t.exec(
      [
        `insert into companies (id, name, created_at, updated_at) values ('co', 'Co', ${T}, ${T});`,
        `insert into departments (id, company_id, name, created_at, updated_at) values ('dept', 'co', 'Dept', ${T}, ${T});`,
        `insert into edge_workers (id, company_id, department_id, script_name, status, created_at, updated_at) values ('w1', 'co', 'dept', 'dw-1', 'active', ${T}, ${T});`,
        version('with-assets', '{"assets":{"directory":"public"},"main":"index.js"}'),
        version('code-only', '{"main":"index.js"}'),
      ].join('\n'),
      url,
    )

    const store = await t.open(t.settings({store: {url}}))
    expect(await store.migrate()).toEqual(['0009_version_assets'])
    const digest = 'a'.repeat(64)
    expect(await store.sweeps.assetReferences([digest])).toEqual(new Map([[digest, ['with-assets']]]))
  })
})
