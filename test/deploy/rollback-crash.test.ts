// Crash safety of rollback: the real CLI is SIGKILLed at each stage of a rollback (EDGEWORKERS_FAULT)
// — after its copy of the target is committed, and at every stage of the deploy task that serves it —
// then the operator's rerun (or the next run of the row's task) converges: the target's release is
// served by exactly one deployed version, one copy, one audit row, nothing older than the intent.
import path from 'node:path'
import {execa} from 'execa'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {createEngine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {ROLLED_BACK_ACTION, rollbackWorker} from '../../src/engine/deploy/rollback.js'
import {runDeployTask} from '../../src/engine/deploy/task.js'
import type {FaultPoint} from '../../src/engine/faults.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {openStore} from '../../src/store/index.js'
import {CLI_BIN as BIN} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {AdvancedWallClock, describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const HELLO = path.join(FIXTURES_DIR, 'hello')
const HELLO_V2 = path.join(FIXTURES_DIR, 'hello-v2')
const LEASE_SECONDS = 1
const POINTS: FaultPoint[] = [
  'rollback.after_commit',
  'deploy.after_lease',
  'deploy.after_commit_deploying',
  'deploy.after_upload',
  'deploy.after_readback',
  'deploy.before_settle',
]

describeEachStore('rollback crash safety', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)
  const actor = {type: 'operator', id: 'alice'}

  beforeAll(async () => {
    host = await startTestHost()
  })
  afterAll(async () => {
    await host?.stop()
  })

  for (const point of POINTS) {
    test(`killed at ${point}: a later run serves the rollback target, once`, async () => {
      await kit.pair()
      const department = await kit.department()
      const engine = await kit.engine()
      const v1 = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
      const v2 = await deployWorker(engine, {projectDir: HELLO_V2, departmentId: department, wait: true})
      expect([v1.state, v2.state]).toEqual(['completed', 'completed'])

      const settings = kit.settings({deploy: {lease_seconds: LEASE_SECONDS}})
      const crashed = await execa('node', [BIN, 'rollback', department, '--json'], {
        reject: false,
        env: {
          EDGEWORKERS_DATA_DIR: settings.data_dir,
          EDGEWORKERS_STORE__URL: settings.store.url,
          EDGEWORKERS_DEPLOY__LEASE_SECONDS: String(LEASE_SECONDS),
          EDGEWORKERS_FAULT: point,
        },
      })
      expect(crashed.signal).toBe('SIGKILL')

      // The later run uses the wall clock, as the crashed process did, but moved past its lease.
      const store = await openStore(settings, {clock: new AdvancedWallClock(LEASE_SECONDS * 1000 + 200)})
      try {
        const later = await createEngine(store, settings, onPremHosts)
        const copyRow = (await store.outbox.list({operation: 'deploy', limit: 1_000})).find(
          (row) => row.department_id === department && row.version_id !== v1.versionId && row.version_id !== v2.versionId,
        )
        if (copyRow) {
          const result = await runDeployTask(later, {outboxId: copyRow.id, companyId: copyRow.company_id!, departmentId: department, messageId: copyRow.id})
          expect(result.outcome).toBe('completed')
        } else {
          // Killed before the deploy was queued: the operator runs the rollback again, which deploys the copy left behind.
          expect(point).toBe('rollback.after_commit')
          expect(await rollbackWorker(later, {departmentId: department, wait: true, actor})).toMatchObject({state: 'completed', reused: true})
        }

        const worker = (await store.workers.get(v1.workerId))!
        const versions = await store.workers.listVersions(worker.id)
        const copies = versions.filter((version) => version.rollback_of === v1.versionId)
        expect(copies).toHaveLength(1)
        expect(versions.filter((version) => version.state === 'deployed').map((version) => version.id)).toEqual([copies[0]!.id])
        expect(worker.current_version_id).toBe(copies[0]!.id)
        expect(copies[0]!.release_generation).toBe(v1.releaseGeneration)
        expect((await store.workers.getVersion(v2.versionId))?.state).toBe('superseded')
        expect((await store.audit.list({action: ROLLED_BACK_ACTION})).filter((row) => row.resource_id === worker.id)).toHaveLength(1)
        const response = await fetch(`${host.publicUrl}/${worker.script_name}/`)
        expect(await response.text()).toBe('Hello from an Edge Worker! (GET /)\n')
      } finally {
        await store.close()
      }
    })
  }
})
