// The whole path with the real deploy task and an in-memory host: `deploy --no-wait` leaves its row
// to the passes and the next pass deploys it in-process; a waiting deploy's reserved row is not
// raced by a pass.
import {expect, test} from 'vitest'
import {sha256Hex} from '../../../src/canonical-json.js'
import {deployWorker} from '../../../src/engine/deploy/deploy-worker.js'
import {enqueueDeploy} from '../../../src/engine/deploy/enqueue.js'
import {submitVersion} from '../../../src/engine/deploy/submit.js'
import {runDeployTask} from '../../../src/engine/deploy/task.js'
import {runPass} from '../../../src/engine/pass/index.js'
import type {EdgeProvider, ScriptDetails, UploadScriptInput} from '../../../src/provider/types.js'
import {describeEachStore} from '../../support/stores.js'
import {fixturePath} from '../project-helpers.js'
import {passEngine, readyProvider, SCOPE} from './support.js'

/** Holds uploaded scripts in memory and answers the readiness probe for whatever it holds. */
class InMemoryHost {
  readonly uploads: string[] = []
  private readonly scripts = new Map<string, ScriptDetails>()

  provider(): Partial<EdgeProvider> {
    return {
      uploadScript: async (input: UploadScriptInput) => {
        this.uploads.push(input.scriptName)
        const details: ScriptDetails = {
          scriptName: input.scriptName,
          releaseGeneration: input.releaseGeneration,
          builderPolicy: input.builderPolicy,
          state: 'active',
          moduleDigests: Object.fromEntries(input.modules.map((module) => [module.name, sha256Hex(module.content)])),
          split: input.split,
          tags: input.tags,
        }
        this.scripts.set(input.scriptName, details)
        return details
      },
      getScript: async (scriptName: string) => this.scripts.get(scriptName) ?? null,
      probeReadiness: async (scriptName: string, releaseGeneration: string) => this.scripts.get(scriptName)?.releaseGeneration === releaseGeneration,
      describeHost: async () => ({publicUrl: 'http://127.0.0.1:8787', baseDomain: 'workers.localhost', experimental: false}),
    }
  }
}

describeEachStore('deploy --no-wait and the next pass', (t) => {
  async function setUp() {
    const host = new InMemoryHost()
    const engine = await passEngine(t, {resolution: readyProvider(host.provider())})
    await t.store.tenants.createCompany({id: 'acme', name: 'Acme'})
    await t.store.tenants.createDepartment({id: 'acme-sales', company_id: 'acme', name: 'Sales'})
    return {engine, host}
  }

  test('the row is handed to the passes and the next pass runs the deploy task to completion', async () => {
    const {engine, host} = await setUp()
    const outcome = await deployWorker(engine, {projectDir: fixturePath('basic'), departmentId: 'acme-sales', wait: false})
    expect(outcome).toMatchObject({state: 'pending', message: 'left to the next reconcile pass'})
    expect(await t.store.outbox.get(outcome.outboxId)).toMatchObject({status: 'pending', lease_owner: null, dispatch_namespace: SCOPE})
    expect(host.uploads).toEqual([])

    const result = await runPass(engine, {lanes: ['recovery']})
    expect(result.lanes[0]).toMatchObject({claimed: 1, completed: 1})
    expect(host.uploads).toEqual([outcome.scriptName])
    expect(await t.store.outbox.get(outcome.outboxId)).toMatchObject({status: 'completed', attempts: 1})
    expect(await t.store.workers.get(outcome.workerId)).toMatchObject({status: 'active', current_version_id: outcome.versionId, serving_scope: SCOPE})
    expect(await t.store.workers.getVersion(outcome.versionId)).toMatchObject({state: 'deployed'})
  })

  test('a waiting deploy reserves its row for itself and runs it at once', async () => {
    const {engine, host} = await setUp()
    const waiting = await deployWorker(engine, {projectDir: fixturePath('basic'), departmentId: 'acme-sales', wait: true})
    expect(waiting).toMatchObject({state: 'completed'})
    expect(await t.store.outbox.get(waiting.outboxId)).toMatchObject({status: 'completed', attempts: 1, lease_owner: engine.owner})
    expect(host.uploads).toHaveLength(1)
  })

  test('between the enqueue and the lease of a waiting deploy, a pass claims nothing', async () => {
    const {engine} = await setUp()
    // The waiting deploy, paused right after its enqueue: enqueue with the reservation, no task yet.
    const {worker, version} = await submitVersion(engine, {projectDir: fixturePath('basic'), departmentId: 'acme-sales', scope: SCOPE})
    const {row} = await enqueueDeploy(engine, {worker, version, scope: SCOPE, dispatcher: 'deploy-process'})

    expect((await runPass(engine, {lanes: ['recovery']})).lanes[0]).toMatchObject({claimed: 0})
    const result = await runDeployTask(engine, {outboxId: row.id, companyId: 'acme', departmentId: 'acme-sales', messageId: row.id})
    expect(result.outcome).toBe('completed')
  })
})
