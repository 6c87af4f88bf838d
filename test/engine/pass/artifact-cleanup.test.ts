// The artifact cleanup lane over a real FileArtifactStore: payload validation, referenced artifacts
// kept, idempotent deletes, lease-fenced settles, a store that cannot be opened, batch cap and lease.
import {existsSync} from 'node:fs'
import path from 'node:path'
import {expect, test, vi} from 'vitest'
import {artifactKeyFor, FileArtifactStore, type ArtifactKind, type ArtifactStore} from '../../../src/artifacts/store.js'
import {sha256Hex} from '../../../src/canonical-json.js'
import {cleanupDedupeKey} from '../../../src/engine/deploy/submit.js'
import {EXECUTION_FENCED} from '../../../src/engine/gates.js'
import {runPass, type PassResult} from '../../../src/engine/pass/index.js'
import type {JsonObject, OutboxRow} from '../../../src/store/index.js'
import {describeEachStore, type StoreHarness} from '../../support/stores.js'
import {enqueueDeployRow, passEngine, recordingDispatch, SCOPE, seedWorker, tempArtifactDir, type SettingsOverrides, type TestEngine} from './support.js'

const cleanup = (engine: TestEngine, options: {openArtifactStore?: () => Promise<ArtifactStore>} = {}) =>
  runPass(engine, {lanes: ['artifact_cleanup'], ...options})
const laneOf = (result: PassResult) => result.lanes[0]!
const row = (t: StoreHarness, id: string) => t.store.outbox.get(id) as Promise<OutboxRow>

describeEachStore('artifact cleanup lane', (t) => {
  let intents = 0

  async function setUp(settings?: SettingsOverrides) {
    const root = tempArtifactDir()
    const artifacts = await FileArtifactStore.open(root)
    const engine = await passEngine(t, {settings, artifacts})
    const fileOf = (key: string) => path.join(root, 'artifacts', ...key.split('/'))
    return {engine, artifacts, fileOf}
  }

  /** An intent as submitVersion records it, already due (its submission never committed). */
  async function intent(payload: JsonObject): Promise<OutboxRow> {
    const n = ++intents
    const {row: created} = await t.store.outbox.enqueue({
      operation: 'artifact_cleanup',
      dedupe_key: cleanupDedupeKey(`version-${n}:${String(payload.kind)}`),
      dispatch_namespace: SCOPE,
      payload,
    })
    t.clock.advance(1)
    return created
  }

  async function orphan(artifacts: ArtifactStore, kind: ArtifactKind = 'bundle', content = `orphan ${intents}`) {
    const key = await artifacts.put(kind, Buffer.from(content))
    const digest = sha256Hex(content)
    return {key, digest, row: await intent({kind, object_key: key, digest})}
  }

  test('a due orphan is deleted and its intent completes; intents not yet due, adopted or of another scope are left alone', async () => {
    const {engine, artifacts, fileOf} = await setUp()
    const {key, row: due} = await orphan(artifacts)
    const later = await t.store.outbox.enqueue({
      operation: 'artifact_cleanup',
      dedupe_key: 'later',
      dispatch_namespace: SCOPE,
      payload: {},
      next_attempt_at: t.clock.now() + 900_000,
    })
    const adopted = await intent({kind: 'project', object_key: 'x', digest: 'y'})
    await t.exec(`update edge_worker_outbox set status = 'cancelled', last_error_code = 'adopted' where id = '${adopted.id}'`)
    await t.store.outbox.enqueue({operation: 'artifact_cleanup', dedupe_key: 'other-kit', dispatch_namespace: 'onprem:ba9876543210', payload: {}})

    expect(existsSync(fileOf(key))).toBe(true)
    expect(laneOf(await cleanup(engine))).toMatchObject({claimed: 1, completed: 1, retried: 0, failed: 0, uncertain: 0, skipped: 0})
    expect(existsSync(fileOf(key))).toBe(false)
    expect(await row(t, due.id)).toMatchObject({status: 'completed', attempts: 1, lease_token: null})
    expect(await row(t, later.row.id)).toMatchObject({status: 'pending', attempts: 0})
  })

  test('an artifact any version references is never deleted: the intent is cancelled and points at the owning version', async () => {
    const {engine, artifacts, fileOf} = await setUp()
    const asBundle = await orphan(artifacts, 'bundle', 'shared bundle')
    const asProject = await orphan(artifacts, 'project', 'shared project')
    // Keys name content: a version of another tenant may hold the same bytes.
    const owner = await seedWorker(t)
    const version = await t.store.workers.createVersion({
      ...versionInput(owner.worker.id),
      project_artifact_key: asProject.key,
      project_digest: asProject.digest,
      bundle_artifact_key: asBundle.key,
      bundle_digest: asBundle.digest,
    })

    expect(laneOf(await cleanup(engine))).toMatchObject({claimed: 2, completed: 2})
    for (const kept of [asBundle, asProject]) {
      expect(existsSync(fileOf(kept.key))).toBe(true)
      expect(await row(t, kept.row.id)).toMatchObject({
        status: 'cancelled',
        last_error_code: 'artifact_referenced',
        last_error: `artifact ${kept.key} is referenced by version ${version.id}`,
      })
    }
  })

  test('an invalid payload fails the intent with cleanup_payload_invalid and deletes nothing', async () => {
    const {engine, artifacts, fileOf} = await setUp()
    const {key, digest} = await orphan(artifacts)
    const invalid: JsonObject[] = [
      {kind: 'bundle', object_key: key, digest, extra: 1},
      {kind: 'bundle', object_key: key},
      {kind: 'sbom', object_key: key, digest},
      {kind: 'bundle', object_key: key, digest: digest.toUpperCase()},
      {kind: 'project', object_key: key, digest},
      {kind: 'bundle', object_key: artifactKeyFor('bundle', sha256Hex('other')), digest},
    ]
    await t.exec(`delete from edge_worker_outbox`)
    const rows = []
    for (const payload of invalid) rows.push(await intent(payload))

    expect(laneOf(await cleanup(engine))).toMatchObject({claimed: invalid.length, failed: invalid.length})
    for (const failed of rows) {
      expect(await row(t, failed.id)).toMatchObject({
        status: 'failed',
        last_error_code: 'cleanup_payload_invalid',
        last_error: expect.stringMatching(/^the cleanup payload is invalid: /),
      })
    }
    expect(existsSync(fileOf(key))).toBe(true)
  })

  test('deleting an artifact that is already gone succeeds', async () => {
    const {engine, artifacts} = await setUp()
    const {key, row: due} = await orphan(artifacts)
    await artifacts.delete(key)
    expect(laneOf(await cleanup(engine))).toMatchObject({claimed: 1, completed: 1})
    expect(await row(t, due.id)).toMatchObject({status: 'completed'})
  })

  test('a failed delete retries the intent on the backoff ladder, and fails it once attempts run out', async () => {
    const {engine, artifacts} = await setUp({backoff: {max_attempts: 2, ladder_seconds: [30], jitter_ratio: 0}})
    const {row: due} = await orphan(artifacts)
    const failing = withDelete(artifacts, async () => Promise.reject(Object.assign(new Error('EIO: i/o error, unlink'), {code: 'EIO'})))
    const open = async () => failing

    expect(laneOf(await cleanup(engine, {openArtifactStore: open}))).toMatchObject({claimed: 1, retried: 1})
    expect(await row(t, due.id)).toMatchObject({
      status: 'pending',
      attempts: 1,
      next_attempt_at: t.clock.now() + 30_000,
      last_error_code: 'artifact_delete_failed',
    })
    t.clock.advance(30_000)
    expect(laneOf(await cleanup(engine, {openArtifactStore: open}))).toMatchObject({claimed: 1, failed: 1})
    expect(await row(t, due.id)).toMatchObject({status: 'failed', attempts: 2, last_error: expect.stringMatching(/EIO/)})
  })

  test('an artifact store that cannot be opened burns one attempt of every claimed intent; the lane reports the error, the other lanes still run', async () => {
    const {engine, artifacts} = await setUp()
    const due = [await orphan(artifacts), await orphan(artifacts)]
    const deploy = await enqueueDeployRow(engine, await seedWorker(t))
    const dispatch = recordingDispatch()
    const result = await runPass(engine, {
      lanes: ['recovery', 'artifact_cleanup'],
      dispatchDeploy: dispatch,
      openArtifactStore: async () => Promise.reject(new Error('artifact store /data/artifacts is not usable: EACCES')),
    })
    expect(result.lanes.map((lane) => lane.lane)).toEqual(['recovery', 'artifact_cleanup'])
    expect(result.lanes[0]).toMatchObject({claimed: 1, completed: 1})
    expect(result.lanes[1]).toMatchObject({claimed: 2, retried: 2, error: 'artifact store /data/artifacts is not usable: EACCES'})
    for (const {row: burnt} of due)
      expect(await row(t, burnt.id)).toMatchObject({status: 'pending', attempts: 1, last_error_code: 'artifact_store_unavailable'})
    expect(await row(t, deploy.id)).toMatchObject({status: 'completed'})
    expect(engine.log.messages('warn')).toContain('Edge Worker artifact cleanup failed: artifact store /data/artifacts is not usable: EACCES')
  })

  test('settles are fenced by the lease: a runner that lost its lease mid-delete changes nothing', async () => {
    const {engine, artifacts} = await setUp({artifact_cleanup: {lease_seconds: 30}})
    const {row: due} = await orphan(artifacts)
    let taken: OutboxRow | undefined
    const slow = withDelete(artifacts, async (key) => {
      expect(await row(t, due.id)).toMatchObject({status: 'leased', lease_expires_at: t.clock.now() + 30_000})
      // The lease runs out while this runner is stuck; another runner reclaims the intent.
      t.clock.advance(30_000)
      taken = (await t.store.outbox.claim({operation: 'artifact_cleanup', scope: SCOPE, owner: 'other', limit: 10, leaseSeconds: 30}))[0]
      await artifacts.delete(key)
    })
    expect(laneOf(await cleanup(engine, {openArtifactStore: async () => slow}))).toMatchObject({claimed: 1, skipped: 1})
    expect(await row(t, due.id)).toMatchObject({status: 'leased', lease_owner: 'other', lease_token: taken!.lease_token})
  })

  test('each claim takes at most artifact_cleanup.batch_size intents and the pass drains them all', async () => {
    const {engine, artifacts} = await setUp({artifact_cleanup: {batch_size: 3}})
    for (let i = 0; i < 7; i++) await orphan(artifacts)
    const claims = vi.spyOn(t.store.outbox, 'claim')
    const result = await cleanup(engine)
    const sizes = await Promise.all(claims.mock.results.map(async (claim) => ((await claim.value) as OutboxRow[]).length))
    claims.mockRestore()
    expect(sizes).toEqual([3, 3, 1, 0])
    expect(laneOf(result)).toMatchObject({claimed: 7, completed: 7})
  })

  test('claims nothing while the execution gate is closed (a backup is copying the artifact store)', async () => {
    const {engine, artifacts, fileOf} = await setUp()
    const {key} = await orphan(artifacts)
    await t.store.kit.beginFence({scope: SCOPE, reason: 'backup', ttlSeconds: 600})
    expect(laneOf(await cleanup(engine))).toMatchObject({claimed: 0, skippedReason: EXECUTION_FENCED})
    expect(existsSync(fileOf(key))).toBe(true)
  })

  test('intents not reached before the pass stops go back due now, their attempt uncounted', async () => {
    const {engine, artifacts} = await setUp()
    const due = [await orphan(artifacts), await orphan(artifacts), await orphan(artifacts)]
    const stop = new AbortController()
    const stopping = withDelete(artifacts, async (key) => {
      stop.abort()
      await artifacts.delete(key)
    })
    const result = await runPass(engine, {lanes: ['artifact_cleanup'], signal: stop.signal, openArtifactStore: async () => stopping})
    expect(laneOf(result)).toMatchObject({claimed: 3, completed: 1, skipped: 2})
    for (const {row: back} of due.slice(1))
      expect(await row(t, back.id)).toMatchObject({status: 'pending', attempts: 0, lease_token: null, next_attempt_at: t.clock.now()})
  })
})

/** The artifact store with its delete replaced. */
function withDelete(artifacts: ArtifactStore, remove: ArtifactStore['delete']): ArtifactStore {
  return {
    put: (kind, bytes) => artifacts.put(kind, bytes),
    get: (key, maxBytes) => artifacts.get(key, maxBytes),
    has: (key) => artifacts.has(key),
    list: (kind) => artifacts.list(kind),
    deleteIfNotPutSince: (key, cutoff) => artifacts.deleteIfNotPutSince(key, cutoff),
    delete: remove,
  }
}

function versionInput(workerId: string) {
  return {worker_id: workerId, release_generation: 'rg-shared', builder_policy: 'department-worker-project-v2.9', manifest: {}, receipt: {}}
}
