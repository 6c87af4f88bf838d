// The deploy pipeline end to end on both store backends, against a real edge host running real
// workerd: build → enqueue → deploy task → served over real HTTP, and every failure mode.
import path from 'node:path'
import {afterAll, beforeAll, beforeEach, expect, test} from 'vitest'
import {KitError} from '../../src/errors.js'
import type {Engine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {rollbackWorker} from '../../src/engine/deploy/rollback.js'
import {enqueueDeploy} from '../../src/engine/deploy/enqueue.js'
import {submitVersion} from '../../src/engine/deploy/submit.js'
import {runDeployTask} from '../../src/engine/deploy/task.js'
import {paths} from '../support/paths.js'
import {FaultProxy} from '../support/fault-proxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR, materializeOversizeFixture} from '../support/worker-fixtures.js'
import {mkdtempSync} from 'node:fs'
import {tmpdir} from 'node:os'

const HELLO = path.join(FIXTURES_DIR, 'hello')
const HELLO_V2 = path.join(FIXTURES_DIR, 'hello-v2')
const FAST_READINESS = {readiness_deadline_seconds: 2, readiness_probe_timeout_seconds: 1, readiness_probe_interval_ms: 50}

async function fetchText(url: string): Promise<{status: number; body: string}> {
  const response = await fetch(url)
  return {status: response.status, body: await response.text()}
}

describeEachStore('deploy pipeline', (t) => {
  let host: TestHost
  let proxy: FaultProxy
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost()
    proxy = await new FaultProxy(() => host.adminUrl).start()
  })
  afterAll(async () => {
    await proxy?.stop()
    await host?.stop()
  })
  beforeEach(async () => {
    proxy.rule = () => ({kind: 'forward'})
    await kit.pair()
  })

  /** Submit + enqueue without running the task, for tests that run it under special conditions. */
  async function enqueued(engine: Engine, projectDir = HELLO) {
    const department = await kit.department()
    const resolution = await engine.resolveProvider()
    if (resolution.status !== 'ready') throw new Error(`provider not ready: ${resolution.message}`)
    const scope = resolution.scope
    const {worker, version} = await submitVersion(engine, {projectDir, departmentId: department, scope})
    const {row} = await enqueueDeploy(engine, {worker, version, scope})
    const run = (target = engine) =>
      runDeployTask(target, {outboxId: row.id, companyId: worker.company_id, departmentId: worker.department_id, messageId: row.id})
    return {worker, version, row, department, run}
  }

  test('deploy builds, uploads, passes the readiness gate and serves; worker show reflects it', async () => {
    const engine = await kit.engine()
    const outcome = await deployWorker(engine, {projectDir: HELLO, departmentId: await kit.department(), wait: true})
    expect(outcome).toMatchObject({state: 'completed', code: null, duplicate: false, reused: false})
    expect(outcome.url).toBe(`${host.publicUrl}/${outcome.scriptName}/`)
    expect(await fetchText(outcome.url!)).toEqual({status: 200, body: 'Hello from an Edge Worker! (GET /)\n'})

    const worker = await t.store.workers.get(outcome.workerId)
    expect(worker).toMatchObject({status: 'active', current_version_id: outcome.versionId, serving_scope: (await kit.pair()).scope})
    expect((await t.store.workers.getVersion(outcome.versionId))?.state).toBe('deployed')
    expect((await t.store.outbox.get(outcome.outboxId))?.status).toBe('completed')
    const cleanups = await t.store.outbox.list({operation: 'artifact_cleanup'})
    expect(cleanups.map((row) => [row.status, row.last_error_code])).toEqual([
      ['cancelled', 'adopted'],
      ['cancelled', 'adopted'],
    ])
  })

  test('a redeploy serves the new version and supersedes the old one; the same project again is a duplicate; a rollback redeploys', async () => {
    const engine = await kit.engine()
    const department = await kit.department()
    const first = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
    const second = await deployWorker(engine, {projectDir: HELLO_V2, departmentId: department, wait: true})
    expect(second.state).toBe('completed')
    expect(second.releaseGeneration).not.toBe(first.releaseGeneration)
    expect((await fetchText(second.url!)).body).toBe('Hello from Edge Workers, version 2!\n')
    expect((await t.store.workers.getVersion(first.versionId))?.state).toBe('superseded')
    expect((await t.store.workers.getVersion(second.versionId))?.state).toBe('deployed')

    const again = await deployWorker(engine, {projectDir: HELLO_V2, departmentId: department, wait: true})
    expect(again).toMatchObject({state: 'completed', duplicate: true, reused: true, outboxId: second.outboxId})
    expect(await t.store.outbox.list({operation: 'deploy'})).toHaveLength(2)

    // A rollback to the superseded release deploys it again as a new version.
    const rollback = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
    expect(rollback).toMatchObject({state: 'completed', duplicate: false, reused: false, releaseGeneration: first.releaseGeneration})
    expect(rollback.versionId).not.toBe(first.versionId)
    expect((await fetchText(rollback.url!)).body).toBe('Hello from an Edge Worker! (GET /)\n')
    expect((await t.store.workers.getVersion(second.versionId))?.state).toBe('superseded')
  })

  test('deploy records its message, tag, author, source and size on the version, and when it served', async () => {
    const engine = await kit.engine()
    const notes = {message: 'first cut', tag: 'v1.0', author: 'alice'}
    const outcome = await deployWorker(engine, {projectDir: HELLO, departmentId: await kit.department(), wait: true, notes})
    expect(outcome.state).toBe('completed')
    const version = (await t.store.workers.getVersion(outcome.versionId))!
    expect(version).toMatchObject({...notes, rollback_of: null, source: {projectDir: HELLO, kind: 'edgeworker', env: null}})
    expect(version.size_bytes).toBeGreaterThan(0)
    expect(version.deployed_at).toBeGreaterThanOrEqual(version.created_at)
  })

  test('rollback deploys the version served before as a new version; --to by tag; refusals write nothing', async () => {
    const engine = await kit.engine()
    const department = await kit.department()
    const actor = {type: 'operator', id: 'alice'}
    const first = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true, notes: {tag: 'v1'}})
    const second = await deployWorker(engine, {projectDir: HELLO_V2, departmentId: department, wait: true, notes: {tag: 'v2'}})
    const back = await rollbackWorker(engine, {departmentId: department, wait: true, actor})
    expect(back).toMatchObject({state: 'completed', rolledBackTo: first.versionId, releaseGeneration: first.releaseGeneration})
    expect((await fetchText(back.url!)).body).toBe('Hello from an Edge Worker! (GET /)\n')
    expect(await t.store.workers.getVersion(back.versionId)).toMatchObject({
      rollback_of: first.versionId,
      message: `rollback to ${first.versionId}`,
      author: 'alice',
    })
    expect((await t.store.audit.list({action: 'edge_worker.rolled_back'})).map((row) => row.actor_id)).toEqual(['alice'])

    const versionsBefore = (await t.store.workers.listVersions(back.workerId)).length
    const refused = (to: string) => rollbackWorker(engine, {departmentId: department, to, wait: true, actor}).catch((error: KitError) => error.code)
    expect(await refused('v1')).toBe('usage')
    expect(await refused('nope')).toBe('not_found')
    expect((await t.store.workers.listVersions(back.workerId)).length).toBe(versionsBefore)

    const forward = await rollbackWorker(engine, {departmentId: department, to: 'v2', wait: true, actor})
    expect(forward).toMatchObject({state: 'completed', rolledBackTo: second.versionId})
    expect((await fetchText(forward.url!)).body).toBe('Hello from Edge Workers, version 2!\n')
  })

  test('a tampered receipt digest fails integrity and never downgrades the deployed version', async () => {
    const engine = await kit.engine()
    const department = await kit.department()
    const first = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
    const scope = (await kit.pair()).scope
    const {worker, version} = await submitVersion(engine, {projectDir: HELLO_V2, departmentId: department, scope})
    const receipt = {...version.receipt, lockDigest: 'f'.repeat(64)}
    await t.exec(`update edge_worker_versions set receipt = '${JSON.stringify(receipt)}' where id = '${version.id}'`)
    const {row} = await enqueueDeploy(engine, {worker, version, scope})
    const result = await runDeployTask(engine, {outboxId: row.id, companyId: worker.company_id, departmentId: worker.department_id, messageId: row.id})
    expect(result).toMatchObject({outcome: 'failed', code: 'artifact_integrity_failed'})
    expect(await t.store.workers.get(worker.id)).toMatchObject({status: 'active', current_version_id: first.versionId})
    expect((await t.store.workers.getVersion(first.versionId))?.state).toBe('deployed')
    expect((await fetchText(first.url!)).body).toBe('Hello from an Edge Worker! (GET /)\n')
  })

  test('a receipt with an extra key fails integrity', async () => {
    const engine = await kit.engine()
    const {version, run} = await enqueued(engine)
    const receipt = {...version.receipt, extra: 'x'}
    await t.exec(`update edge_worker_versions set receipt = '${JSON.stringify(receipt)}' where id = '${version.id}'`)
    expect(await run()).toMatchObject({outcome: 'failed', code: 'artifact_integrity_failed'})
    expect((await t.store.workers.getVersion(version.id))?.state).toBe('failed')
  })

  test('a missing artifact fails integrity before anything reaches the host', async () => {
    const engine = await kit.engine()
    const {worker, version, run} = await enqueued(engine)
    await engine.artifacts.delete(version.bundle_artifact_key)
    const uploadsBefore = proxy.seen.length
    expect(await run()).toMatchObject({outcome: 'failed', code: 'artifact_integrity_failed'})
    expect(proxy.seen.length).toBe(uploadsBefore)
    expect((await t.store.workers.get(worker.id))?.status).toBe('new')
  })

  test('an oversize project is refused with one line and nothing is written', async () => {
    const engine = await kit.engine()
    const dir = materializeOversizeFixture(mkdtempSync(path.join(tmpdir(), 'edgeworkers-oversize-')))
    const error = await deployWorker(engine, {projectDir: dir, departmentId: await kit.department(), wait: true}).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(KitError)
    expect((error as KitError).code).toBe('usage')
    expect((error as KitError).message).toMatch(/^bundle is [0-9.]+ MiB; the limit is 5 MiB$/)
    expect(await t.store.outbox.list()).toEqual([])
    expect(await t.store.workers.list()).toEqual([])
  })

  test('an unknown or soft-deleted department is refused before anything is written', async () => {
    const engine = await kit.engine()
    await expect(deployWorker(engine, {projectDir: HELLO, departmentId: 'nope', wait: true})).rejects.toMatchObject({code: 'not_found'})
    expect(await t.store.outbox.list()).toEqual([])
  })

  test('host down before the upload: retry with backoff, the version goes back to built', async () => {
    await kit.pair('http://127.0.0.1:9') // discard port: nothing listens
    const engine = await kit.engine({provider: {connect_timeout_ms: 500}})
    const {worker, version, row, run} = await enqueued(engine)
    expect(await run()).toMatchObject({outcome: 'retry', code: 'edge_host_unreachable', exhausted: false})
    const after = await t.store.outbox.get(row.id)
    // Nothing reached the host: no attempt spent, one wait.
    expect(after).toMatchObject({status: 'pending', last_error_code: 'edge_host_unreachable', attempts: 0, waits: 1})
    expect(after!.next_attempt_at!).toBeGreaterThan(t.clock.now())
    expect((await t.store.workers.getVersion(version.id))?.state).toBe('built')
    expect((await t.store.workers.get(worker.id))?.status).toBe('new')
  })

  test('connection cut after the upload reached the host: read back decides, and it completes', async () => {
    await kit.pair(proxy.url)
    const engine = await kit.engine({provider: {read_timeout_ms: 5_000}})
    proxy.rule = ({method}) => (method === 'PUT' ? {kind: 'forward_then_cut'} : {kind: 'forward'})
    const {version, run} = await enqueued(engine)
    const result = await run()
    expect(result).toMatchObject({outcome: 'completed', releaseGeneration: version.release_generation})
    expect(proxy.seen.filter((seen) => seen.method === 'PUT')).toHaveLength(1)
  })

  test('host 5xx on upload: retry with backoff', async () => {
    await kit.pair(proxy.url)
    const engine = await kit.engine()
    proxy.rule = ({method}) => (method === 'PUT' ? {kind: 'answer', status: 503, body: {code: 'unavailable', message: 'try later'}} : {kind: 'forward'})
    const {row, run} = await enqueued(engine)
    expect(await run()).toMatchObject({outcome: 'retry', code: 'edge_host_5xx'})
    expect((await t.store.outbox.get(row.id))?.status).toBe('pending')
  })

  test('readiness timeout with short deadlines settles uncertain and leaves the Worker paused', async () => {
    await kit.pair(proxy.url)
    const engine = await kit.engine({deploy: FAST_READINESS})
    proxy.rule = ({url}) =>
      url.includes('releaseGeneration=') ? {kind: 'answer', status: 409, body: {code: 'script_not_ready', message: 'no'}} : {kind: 'forward'}
    const {worker, version, row, run} = await enqueued(engine)
    expect(await run()).toMatchObject({outcome: 'uncertain', code: 'worker_readiness_timeout'})
    expect((await t.store.outbox.get(row.id))?.status).toBe('uncertain')
    expect((await t.store.workers.getVersion(version.id))?.state).toBe('uncertain')
    expect((await t.store.workers.get(worker.id))?.status).toBe('paused')
  })

  test('lease lost mid-task (a second runner took the row): the first runner settles nothing', async () => {
    await kit.pair(proxy.url)
    const engine = await kit.engine()
    const {row, version, run} = await enqueued(engine)
    proxy.rule = ({url}) =>
      url.includes('releaseGeneration=')
        ? {
            kind: 'before_forward',
            run: () => t.exec(`update edge_worker_outbox set lease_token = 'second-runner', lease_owner = 'second' where id = '${row.id}'`),
          }
        : {kind: 'forward'}
    expect(await run()).toEqual({outcome: 'lease_lost'})
    expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'leased', lease_owner: 'second', lease_token: 'second-runner'})
    expect((await t.store.workers.getVersion(version.id))?.state).toBe('deploying')
  })

  test('a deploy that reaches a retired script fails with edge_host_script_retired', async () => {
    const engine = await kit.engine()
    const {worker, version, run} = await enqueued(engine)
    const retired = await host.client((await kit.pair()).shared_secret).call('POST', paths.retire(worker.script_name), {})
    expect(retired.status).toBe(200)
    expect(await run()).toMatchObject({outcome: 'failed', code: 'edge_host_script_retired'})
    expect((await t.store.workers.getVersion(version.id))?.state).toBe('failed')
  })

  test('a row already leased by another runner is skipped as inflight; a finished one as terminal', async () => {
    const engine = await kit.engine()
    const {row, run} = await enqueued(engine)
    const other = await t.store.outbox.leaseById(row.id, {scope: row.dispatch_namespace, owner: 'other', leaseSeconds: 90})
    expect(other.disposition).toBe('acquired')
    expect(await run()).toEqual({outcome: 'skipped', disposition: 'inflight'})
    await t.store.outbox.settle(row.id, other.row!.lease_token!, {status: 'cancelled'})
    expect(await run()).toEqual({outcome: 'skipped', disposition: 'terminal'})
  })

  test('enqueue_deploy: duplicates, digest 409s, maintenance and restore gates, fence deferral', async () => {
    const engine = await kit.engine()
    const scope = (await kit.pair()).scope
    const {worker, version} = await submitVersion(engine, {projectDir: HELLO, departmentId: await kit.department(), scope})
    const first = await enqueueDeploy(engine, {worker, version, scope})
    const again = await enqueueDeploy(engine, {worker, version, scope})
    expect(again).toMatchObject({duplicate: true, deferred: false})
    expect(again.row.id).toBe(first.row.id)

    await expect(enqueueDeploy(engine, {worker, version, scope, operationSettingsDigest: 'xyz'})).rejects.toThrow('409 operation-settings digest is invalid')
    await expect(enqueueDeploy(engine, {worker, version, scope, operationSettingsDigest: 'a'.repeat(64)})).rejects.toThrow(
      '409 operation-settings digest differs from the existing deployment',
    )

    await t.store.kit.setGate(scope, 'maintenance', 'disk swap')
    await expect(enqueueDeploy(engine, {worker, version, scope, baseRevision: 1})).rejects.toMatchObject({reason: 'edge_workers_maintenance'})
    await t.store.kit.setGate(scope, 'maintenance', null)
    await t.store.kit.setGate(scope, 'restore_pending', 'restored from backup')
    await expect(enqueueDeploy(engine, {worker, version, scope, baseRevision: 1})).rejects.toMatchObject({reason: 'edge_workers_restore_pending'})
    await t.store.kit.setGate(scope, 'restore_pending', null)

    await t.store.kit.beginFence({scope, reason: 'backup', ttlSeconds: 60})
    const deferred = await enqueueDeploy(engine, {worker, version, scope, baseRevision: 1})
    expect(deferred).toMatchObject({duplicate: false, deferred: true})
    expect(deferred.row.last_error_code).toBe('edge_host_fenced')
    const gated = await runDeployTask(engine, {outboxId: deferred.row.id, companyId: worker.company_id, departmentId: worker.department_id, messageId: 'm'})
    expect(gated).toEqual({outcome: 'retry_later', message: 'Edge Workers execution is fenced'})
    expect((await t.store.outbox.get(deferred.row.id))?.status).toBe('deferred')
  })
})
