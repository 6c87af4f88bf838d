// The hosts of a kit (docs/many-hosts.md) on both stores: membership, one kit per host (two kits
// sharing one database never claim each other's hosts), health as the kit saw it, what each host
// serves, and migration 0010 making every existing pairing its kit's first member.
import {Migrator} from 'kysely'
import {expect, test} from 'vitest'
import {KitError} from '../../src/errors.js'
import {migrations} from '../../src/store/migrations/index.js'
import {openPostgres} from '../../src/store/postgres/open.js'
import {openSqlite} from '../../src/store/sqlite/open.js'
import {scriptNameFor, type PairingInput, type VersionCreateInput} from '../../src/store/index.js'
import {describeEachStore} from '../support/stores.js'

const KIT_A = 'onprem:aaaaaaaaaaaa'
const KIT_B = 'onprem:bbbbbbbbbbbb'
const HOST_2 = 'onprem:222222222222'
const HOST_3 = 'onprem:333333333333'

function pairing(scope: string): PairingInput {
  return {scope, host_url: `http://127.0.0.1/${scope}`, host_fingerprint: scope.slice(7), host_public_key: `key-${scope}`, shared_secret: `secret-${scope}`}
}

function version(workerId: string, id: string, state: VersionCreateInput['state']): VersionCreateInput {
  return {
    id,
    worker_id: workerId,
    release_generation: `rg-${id}`,
    builder_policy: 'department-worker-project-v2.9',
    state,
    project_artifact_key: `sha256/${'1'.repeat(64)}`,
    project_digest: '1'.repeat(64),
    bundle_artifact_key: `sha256/${'2'.repeat(64)}`,
    bundle_digest: '2'.repeat(64),
    manifest: {main: 'index.js'},
    receipt: {receiptVersion: '1'},
  }
}

const kitError = (error: unknown) => (error instanceof KitError ? {code: error.code, message: error.message} : error)

describeEachStore('kit hosts', (t) => {
  test('the paired host is the first member; added hosts follow in order; each keeps its own secret', async () => {
    await t.store.kit.savePairing(pairing(KIT_A))
    t.clock.advance(1_000)
    await t.store.hosts.addMember(KIT_A, pairing(HOST_2), 'http://127.0.0.1:9002')
    t.clock.advance(1_000)
    await t.store.hosts.addMember(KIT_A, pairing(HOST_3), null)

    const members = await t.store.hosts.listMembers(KIT_A)
    expect(members.map((row) => [row.host_scope, row.scope, row.state, row.public_url])).toEqual([
      [KIT_A, KIT_A, 'active', null],
      [HOST_2, KIT_A, 'active', 'http://127.0.0.1:9002'],
      [HOST_3, KIT_A, 'active', null],
    ])
    expect(JSON.stringify(members)).not.toContain('secret-')
    expect(await t.store.hosts.memberSecrets(KIT_A)).toEqual(new Map([KIT_A, HOST_2, HOST_3].map((scope) => [scope, `secret-${scope}`])))
  })

  test('two kits share the database: a host of one kit cannot join the other until removed, and nothing is written on refusal', async () => {
    await t.store.kit.savePairing(pairing(KIT_A))
    await t.store.kit.savePairing(pairing(KIT_B))
    await t.store.hosts.addMember(KIT_A, pairing(HOST_2), null)

    const refused = await t.store.hosts.addMember(KIT_B, {...pairing(HOST_2), shared_secret: 'other'}, null).catch(kitError)
    expect(refused).toEqual({code: 'conflict', message: `host ${HOST_2} (http://127.0.0.1/${HOST_2}) belongs to kit ${KIT_A}; remove it there first`})
    expect((await t.store.hosts.listMembers(KIT_B)).map((row) => row.host_scope)).toEqual([KIT_B])
    expect((await t.store.hosts.memberSecrets(KIT_A)).get(HOST_2)).toBe(`secret-${HOST_2}`)

    await t.store.hosts.setState(HOST_2, 'draining')
    expect(await t.store.hosts.removeMember(HOST_2)).toBe(true)
    expect(await t.store.hosts.removeMember(HOST_2)).toBe(false)
    t.clock.advance(1_000)
    await t.store.hosts.addMember(KIT_B, pairing(HOST_2), null)
    expect((await t.store.hosts.listMembers(KIT_A)).map((row) => row.host_scope)).toEqual([KIT_A])
    expect((await t.store.hosts.listMembers(KIT_B)).map((row) => [row.host_scope, row.state])).toEqual([
      [KIT_B, 'active'],
      [HOST_2, 'active'],
    ])
  })

  test('unpairing a kit ends every membership; replacing its host moves the other hosts to the new scope', async () => {
    await t.store.kit.savePairing(pairing(KIT_A))
    await t.store.hosts.addMember(KIT_A, pairing(HOST_2), null)
    await t.store.kit.replacePairing(pairing(KIT_B), KIT_A, 'replaced')
    expect(await t.store.hosts.listMembers(KIT_A)).toEqual([])
    expect((await t.store.hosts.listMembers(KIT_B)).map((row) => row.host_scope).sort()).toEqual([HOST_2, KIT_B])

    await t.store.kit.unpair(KIT_B)
    expect(await t.store.hosts.listMembers(KIT_B)).toEqual([])
    expect(await t.store.hosts.memberSecrets(KIT_B)).toEqual(new Map())
  })

  test('health: unreachable and behind keep their first time until reached and confirmed; confirmation records what the host serves', async () => {
    await t.store.kit.savePairing(pairing(KIT_A))
    await t.store.hosts.addMember(KIT_A, pairing(HOST_2), null)
    const first = t.clock.now()
    await t.store.hosts.markUnreachable(HOST_2)
    await t.store.hosts.markBehind(HOST_2)
    t.clock.advance(5_000)
    await t.store.hosts.markUnreachable(HOST_2)
    await t.store.hosts.markBehind(HOST_2)
    expect(await t.store.hosts.getMember(HOST_2)).toMatchObject({unreachable_since: first, behind_since: first, checked_at: first + 5_000})

    await t.store.hosts.markReached(HOST_2)
    await t.store.hosts.recordReady(KIT_A, 'dw-x', 'rg-1')
    await t.store.hosts.confirmCurrent(HOST_2, [{script_name: 'dw-x', release_generation: 'rg-1'}])
    expect(await t.store.hosts.getMember(HOST_2)).toMatchObject({unreachable_since: null, behind_since: null, confirmed_at: first + 5_000})
    await t.store.hosts.recordReady(HOST_2, 'dw-x', 'rg-2')
    expect((await t.store.hosts.releasesOf(KIT_A)).map((row) => [row.host_scope, row.script_name, row.release_generation])).toEqual([
      [HOST_2, 'dw-x', 'rg-2'],
      [KIT_A, 'dw-x', 'rg-1'],
    ])
    // A host that leaves and comes back proves again what it serves.
    await t.store.hosts.removeMember(HOST_2)
    await t.store.hosts.addMember(KIT_A, pairing(HOST_2), null)
    expect((await t.store.hosts.releasesOf(KIT_A)).map((row) => row.host_scope)).toEqual([KIT_A])
  })

  test("the current releases are the kit's deployed ones; retired Workers are named for a host that still serves them", async () => {
    await t.store.tenants.createCompany({id: 'acme', name: 'Acme'})
    const workers = []
    for (const name of ['a', 'b', 'c', 'd']) {
      await t.store.tenants.createDepartment({id: name, company_id: 'acme', name})
      workers.push(
        await t.store.workers.create({id: `w-${name}`, company_id: 'acme', department_id: name, script_name: scriptNameFor('acme', name), status: 'active'}),
      )
    }
    await t.store.workers.createVersion(version('w-a', 'a1', 'superseded'))
    await t.store.workers.createVersion(version('w-a', 'a2', 'deployed'))
    await t.store.workers.createVersion(version('w-b', 'b1', 'deployed'))
    await t.store.workers.createVersion(version('w-c', 'c1', 'deployed'))
    await t.store.workers.createVersion(version('w-d', 'd1', 'deployed'))
    await t.exec(`update edge_workers set serving_scope = '${KIT_A}', current_version_id = 'a2' where id = 'w-a'`)
    await t.exec(`update edge_workers set serving_scope = '${KIT_B}', current_version_id = 'b1' where id = 'w-b'`)
    await t.exec(`update edge_workers set serving_scope = '${KIT_A}', current_version_id = 'c1', status = 'retired', retired_at = 1 where id = 'w-c'`)
    await t.exec(`update edge_workers set serving_scope = '${KIT_A}' where id = 'w-d'`)

    expect(await t.store.hosts.currentReleases(KIT_A)).toEqual([
      {worker_id: 'w-a', version_id: 'a2', script_name: workers[0]!.script_name, release_generation: 'rg-a2'},
    ])
    const names = workers.map((worker) => worker.script_name)
    expect(await t.store.hosts.retiredScripts(KIT_A, names)).toEqual([workers[2]!.script_name])
    expect(await t.store.hosts.retiredScripts(KIT_B, names)).toEqual([])
  })
})

describeEachStore('migration 0010: existing pairings become their kit first host', (t) => {
  test('an active pairing is its kit first, active member with its secret; an ended one is not', async () => {
    const url = await t.freshUrl()
    const settings = t.settings({store: {url}})
    const db = t.backend === 'sqlite' ? openSqlite(url, settings) : await openPostgres(url, settings)
    try {
      const before = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '0010'))
      const {error} = await new Migrator({db, provider: {getMigrations: async () => before}}).migrateToLatest()
      if (error) throw error
    } finally {
      await db.destroy()
    }
    const insert = (scope: string, unpaired: string) =>
      `insert into kit_pairings (scope, host_url, host_fingerprint, host_public_key, shared_secret, paired_at, unpaired_at)
       values ('${scope}', 'http://h/${scope}', 'fp', 'key', 'secret-${scope}', 1000, ${unpaired});`
    await t.exec(`${insert(KIT_A, 'null')} ${insert(KIT_B, '2000')}`, url)

    const store = await t.open(settings)
    expect(await store.migrate()).toContain('0010_kit_hosts')
    expect(await store.hosts.listMembers(KIT_A)).toEqual([
      expect.objectContaining({host_scope: KIT_A, scope: KIT_A, host_url: `http://h/${KIT_A}`, state: 'active', added_at: 1000, removed_at: null}),
    ])
    expect(await store.hosts.memberSecrets(KIT_A)).toEqual(new Map([[KIT_A, `secret-${KIT_A}`]]))
    expect(await store.hosts.listMembers(KIT_B)).toEqual([])
  })
})
