// Artifact cleanup of asset objects over a real FileArtifactStore: an `asset/sha256/…` object goes
// when no retained version serves it (edge_worker_version_assets) and it was not put within the
// grace; one a version serves — of any Worker, a rollback's copy, a version older than the table —
// or one put again by a submission still on its way, stays.
import {existsSync, utimesSync} from 'node:fs'
import path from 'node:path'
import {expect, test} from 'vitest'
import {artifactKeyFor, FileArtifactStore, type ArtifactKey} from '../../../src/artifacts/store.js'
import {sha256Hex} from '../../../src/canonical-json.js'
import {cleanupDedupeKey} from '../../../src/engine/deploy/submit.js'
import {runPass} from '../../../src/engine/pass/index.js'
import type {VersionRow} from '../../../src/store/index.js'
import {describeEachStore, type StoreHarness} from '../../support/stores.js'
import {passEngine, SCOPE, seedWorker, tempArtifactDir} from './support.js'

const GRACE_SECONDS = 900

describeEachStore('artifact cleanup of asset objects', (t) => {
  async function setUp() {
    const root = tempArtifactDir()
    const artifacts = await FileArtifactStore.open(root)
    const engine = await passEngine(t, {settings: {artifact_cleanup: {grace_seconds: GRACE_SECONDS}}, artifacts})
    const fileOf = (key: ArtifactKey) => path.join(root, 'artifacts', ...key.split('/'))
    /** Stores an asset object as a submission does, put `ageSeconds` ago. */
    const asset = async (content: string, ageSeconds = GRACE_SECONDS + 60) => {
      const key = await artifacts.put('asset', Buffer.from(content))
      const then = new Date(Date.now() - ageSeconds * 1000)
      utimesSync(fileOf(key), then, then)
      return {key, digest: sha256Hex(content), exists: () => existsSync(fileOf(key))}
    }
    const cleanup = async () => (await runPass(engine, {lanes: ['artifact_cleanup']})).lanes[0]!
    return {artifacts, asset, cleanup}
  }

  test('an object no version serves goes once past the grace; one a version serves, or put within the grace, stays', async () => {
    const {asset, cleanup} = await setUp()
    const served = await asset('served')
    const unserved = await asset('unserved')
    const recent = await asset('recent', 10)
    await versionServing(t, [served.digest])

    const lane = await cleanup()
    expect(lane).toMatchObject({note: '1 unreferenced asset object deleted'})
    expect(lane.error).toBeUndefined()
    expect([served.exists(), unserved.exists(), recent.exists()]).toEqual([true, false, true])
  })

  test('an object shared by two Workers stays while either serves it; purging the last company lets it go', async () => {
    const {asset, cleanup} = await setUp()
    const shared = await asset('shared')
    const first = await versionServing(t, [shared.digest])
    const second = await versionServing(t, [shared.digest])
    expect((await t.store.sweeps.assetReferences([shared.digest])).get(shared.digest)).toEqual([first.id, second.id].sort())

    await t.store.tenants.purgeCompany(await companyOf(t, first))
    await cleanup()
    expect(shared.exists()).toBe(true)
    await t.store.tenants.purgeCompany(await companyOf(t, second))
    await cleanup()
    expect(shared.exists()).toBe(false)
  })

  test("a rollback's copy serves the objects of the version it copies", async () => {
    const {asset, cleanup} = await setUp()
    const kept = await asset('rolled back to')
    const original = await versionServing(t, [kept.digest])
    const copy = await t.store.workers.createVersion({...versionFields(original), asset_digests: {sameAs: original.id}})
    // The original's rows go (as a purge takes them); the copy's keep the object.
    await t.exec(`delete from edge_worker_version_assets where version_id = '${original.id}'`)

    await cleanup()
    expect(kept.exists()).toBe(true)
    expect((await t.store.sweeps.assetReferences([kept.digest])).get(kept.digest)).toEqual([copy.id])
  })

  test('a version recorded as serving every object (`*`, older than the table) keeps them all', async () => {
    const {asset, cleanup} = await setUp()
    const old = await asset('served by a version from before migration 0009')
    const {version} = await seedWorker(t)
    await t.exec(`insert into edge_worker_version_assets (version_id, asset_digest) values ('${version.id}', '*')`)

    await cleanup()
    expect(old.exists()).toBe(true)
    expect((await t.store.sweeps.assetReferences([old.digest])).get(old.digest)).toEqual([version.id])
  })

  test('putting an object again renews it: a submission reusing it before its version commits keeps it', async () => {
    const {artifacts, asset, cleanup} = await setUp()
    const reused = await asset('reused')
    await artifacts.put('asset', Buffer.from('reused'))

    await cleanup()
    expect(reused.exists()).toBe(true)
  })

  test('an asset intent whose object a version serves is cancelled, the object kept', async () => {
    const {asset, cleanup} = await setUp()
    const served = await asset('served, with an intent')
    const version = await versionServing(t, [served.digest])
    const {row} = await t.store.outbox.enqueue({
      operation: 'artifact_cleanup',
      dedupe_key: cleanupDedupeKey('failed-submission:asset'),
      dispatch_namespace: SCOPE,
      payload: {kind: 'asset', object_key: artifactKeyFor('asset', served.digest), digest: served.digest},
    })

    expect(await cleanup()).toMatchObject({claimed: 1, completed: 1})
    expect(served.exists()).toBe(true)
    expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'cancelled', last_error: `artifact ${served.key} is referenced by version ${version.id}`})
  })
})

/** A version (of a Worker of its own company) serving these asset objects. */
async function versionServing(t: StoreHarness, digests: string[]): Promise<VersionRow> {
  const {version} = await seedWorker(t)
  return t.store.workers.createVersion({...versionFields(version), asset_digests: digests})
}

function versionFields(version: VersionRow) {
  const {worker_id, release_generation, builder_policy, project_artifact_key, project_digest, bundle_artifact_key, bundle_digest, manifest, receipt} = version
  return {worker_id, release_generation, builder_policy, project_artifact_key, project_digest, bundle_artifact_key, bundle_digest, manifest, receipt}
}

async function companyOf(t: StoreHarness, version: VersionRow): Promise<string> {
  return (await t.store.workers.get(version.worker_id))!.company_id
}
