// Crash safety of a percentage change of a Worker with KV, D1, R2, a queue and static assets: the
// real CLI is SIGKILLed at each stage of `versions deploy A@50 B@50` over a live 90/10 split, and of
// `deploy --percentage 10` (EDGEWORKERS_FAULT) — after its version is committed (or its artifacts
// written), and at every stage of the deploy task — then the operator's rerun (or the next run of the
// row's task) converges on the operator's intent: one new version carrying the split, both versions
// deployed, the host serving exactly that split (each version its own assets, both the one data),
// one audit row, nothing older than the intent.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {request} from 'undici'

import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {createEngine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {runDeployTask} from '../../src/engine/deploy/task.js'
import type {FaultPoint} from '../../src/engine/faults.js'
import {DEPLOYMENT_CHANGED_ACTION, deployVersions} from '../../src/engine/versions/deploy-versions.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {runCliKilledAt} from '../support/crash.js'
import {writeProject} from '../support/cli.js'
import {splitWorkerFiles} from '../support/split-worker.js'

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-gradual-crash-'))
afterAll(() => rmSync(root, {recursive: true, force: true}))
const V1_PROJECT = writeProject(root, 'v1', splitWorkerFiles('v1', true))
const V2_PROJECT = writeProject(root, 'v2', splitWorkerFiles('v2', true))
const LEASE_SECONDS = 1
const TASK_POINTS: FaultPoint[] = [
  'deploy.after_lease',
  'deploy.after_commit_deploying',
  'deploy.after_upload',
  'deploy.after_readback',
  'deploy.before_settle',
]
const POINTS: FaultPoint[] = ['rollback.after_commit', ...TASK_POINTS]

describeEachStore('percentage change crash safety', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)
  const actor = {type: 'operator', id: 'alice'}

  beforeAll(async () => {
    host = await startTestHost()
  })
  afterAll(async () => {
    await host?.stop()
  })

  /** Each version (by its id, through the overrides header) serves its own assets, and reads what the other wrote to KV. */
  async function expectOneDataOwnAssets(script: string, versions: {v1: string; v2: string}) {
    const get = async (pathname: string, version: 'v1' | 'v2') => {
      const headers = {'cloudflare-workers-version-overrides': `${script}="${versions[version]}"`}
      const response = await request(`${host.publicUrl}/${script}${pathname}`, {headers})
      return {status: response.statusCode, text: await response.body.text(), version: response.headers['x-version']}
    }
    for (const [writer, reader] of [
      ['v1', 'v2'],
      ['v2', 'v1'],
    ] as const) {
      expect(await get('/version.txt', writer)).toMatchObject({status: 200, text: `assets of ${writer}`})
      expect(await get(`/kv/put?key=from-${writer}&value=${writer}`, writer)).toEqual({status: 200, text: 'ok', version: writer})
      expect(await get(`/kv/get?key=from-${writer}`, reader)).toEqual({status: 200, text: writer, version: reader})
    }
  }

  for (const point of POINTS) {
    test(`killed at ${point}: a later run serves the 50/50 split, once`, async () => {
      const pairing = await kit.pair()
      const hostScript = async (name: string) => (await host.client(pairing.shared_secret).call('GET', `/v1/scripts/${name}`)).body
      const department = await kit.department()
      const engine = await kit.engine()
      const v1 = await deployWorker(engine, {projectDir: V1_PROJECT, departmentId: department, wait: true})
      const v2 = await deployWorker(engine, {projectDir: V2_PROJECT, departmentId: department, wait: true, percentage: 10})
      expect([v1.state, v2.state]).toEqual(['completed', 'completed'])
      const specs = [`${v1.versionId}@50`, `${v2.versionId}@50`]

      const settings = kit.settings({deploy: {lease_seconds: LEASE_SECONDS}})
      const store = await runCliKilledAt(['versions', 'deploy', department, ...specs], settings, point)
      try {
        // Whatever the kill left, the host still serves the split the operator had: never anything older.
        expect(await hostScript(v1.scriptName)).toMatchObject({
          split: {releaseGeneration: v1.releaseGeneration, percentage: expect.any(Number)},
        })
        const later = await createEngine(store, settings, onPremHosts)
        const changeRow = (await store.outbox.list({operation: 'deploy', limit: 1_000})).find(
          (row) => row.department_id === department && row.version_id !== v1.versionId && row.version_id !== v2.versionId,
        )
        if (changeRow) {
          const result = await runDeployTask(later, {
            outboxId: changeRow.id,
            companyId: changeRow.company_id!,
            departmentId: department,
            messageId: changeRow.id,
          })
          expect(result.outcome).toBe('completed')
        } else {
          // Killed before the deploy was queued: the operator runs the change again, which deploys the version left behind.
          expect(point).toBe('rollback.after_commit')
          expect(await deployVersions(later, {departmentId: department, specs, wait: true, actor})).toMatchObject({state: 'completed', reused: true})
        }

        const worker = (await store.workers.get(v1.workerId))!
        const versions = await store.workers.listVersions(worker.id)
        const changes = versions.filter((version) => version.rollback_of === v2.versionId)
        expect(changes).toHaveLength(1)
        expect(changes[0]!.split).toEqual({percentage: 50, beside: {version_id: v1.versionId, release_generation: v1.releaseGeneration, percentage: 50}})
        expect(worker.current_version_id).toBe(changes[0]!.id)
        expect(versions.filter((version) => version.state === 'deployed').map((version) => version.id)).toEqual([v1.versionId, changes[0]!.id])
        expect((await store.workers.getVersion(v2.versionId))?.state).toBe('superseded')
        expect((await store.audit.list({action: DEPLOYMENT_CHANGED_ACTION})).filter((row) => row.resource_id === worker.id)).toHaveLength(1)
        const details = await hostScript(worker.script_name)
        expect(details).toMatchObject({releaseGeneration: v2.releaseGeneration, split: {releaseGeneration: v1.releaseGeneration, percentage: 50}})
        expect(details.versionIds).toEqual([changes[0]!.id, v2.versionId])
        await expectOneDataOwnAssets(worker.script_name, {v1: v1.versionId, v2: changes[0]!.id})
      } finally {
        await store.close()
      }
    })
  }

  for (const point of ['submit.after_intents', 'submit.after_artifacts', ...TASK_POINTS] as FaultPoint[]) {
    test(`deploy --percentage 10 killed at ${point}: a later run serves the 90/10 split, once`, async () => {
      const pairing = await kit.pair()
      const department = await kit.department()
      const engine = await kit.engine()
      const v1 = await deployWorker(engine, {projectDir: V1_PROJECT, departmentId: department, wait: true})
      expect(v1.state).toBe('completed')

      const settings = kit.settings({deploy: {lease_seconds: LEASE_SECONDS}})
      const store = await runCliKilledAt(['deploy', V2_PROJECT, '--department', department, '--percentage', '10'], settings, point)
      try {
        const later = await createEngine(store, settings, onPremHosts)
        const row = (await store.outbox.list({operation: 'deploy', limit: 1_000})).find(
          (candidate) => candidate.department_id === department && candidate.version_id !== v1.versionId,
        )
        if (row) {
          const result = await runDeployTask(later, {outboxId: row.id, companyId: row.company_id!, departmentId: department, messageId: row.id})
          expect(result.outcome).toBe('completed')
        } else {
          // Killed before the version was committed: the operator deploys again.
          expect(point.startsWith('submit.')).toBe(true)
          expect((await deployWorker(later, {projectDir: V2_PROJECT, departmentId: department, wait: true, percentage: 10})).state).toBe('completed')
        }

        const worker = (await store.workers.get(v1.workerId))!
        const versions = await store.workers.listVersions(worker.id)
        const v2 = versions.filter((version) => version.release_generation !== v1.releaseGeneration)
        expect(v2).toHaveLength(1)
        expect(v2[0]!.split).toEqual({percentage: 10, beside: {version_id: v1.versionId, release_generation: v1.releaseGeneration, percentage: 90}})
        expect(worker.current_version_id).toBe(v2[0]!.id)
        expect(versions.map((version) => version.state)).toEqual(['deployed', 'deployed'])
        const details = (await host.client(pairing.shared_secret).call('GET', `/v1/scripts/${worker.script_name}`)).body
        expect(details).toMatchObject({releaseGeneration: v2[0]!.release_generation, split: {releaseGeneration: v1.releaseGeneration, percentage: 90}})
        await expectOneDataOwnAssets(worker.script_name, {v1: v1.versionId, v2: v2[0]!.id})
      } finally {
        await store.close()
      }
    })
  }
})
