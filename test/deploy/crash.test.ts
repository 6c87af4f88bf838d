// Crash safety of the deploy path: the real CLI is SIGKILLed at each stage (EDGEWORKERS_FAULT), then
// a later run converges — the version is deployed exactly once, the row is terminal, nothing is
// downgraded and no outbox row is lost.
import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {createEngine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {runDeployTask} from '../../src/engine/deploy/task.js'
import type {FaultPoint} from '../../src/engine/faults.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {runCliKilledAt} from '../support/crash.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const HELLO = path.join(FIXTURES_DIR, 'hello')
const LEASE_SECONDS = 1
const POINTS: FaultPoint[] = [
  'submit.after_intents',
  'submit.after_artifacts',
  'deploy.after_lease',
  'deploy.after_commit_deploying',
  'deploy.after_upload',
  'deploy.after_readback',
  'deploy.before_settle',
]

describeEachStore('deploy crash safety', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost()
  })
  afterAll(async () => {
    await host?.stop()
  })

  for (const point of POINTS) {
    test(`killed at ${point}: a later run converges to one deployed version`, async () => {
      await kit.pair()
      const department = await kit.department()
      const settings = kit.settings({deploy: {lease_seconds: LEASE_SECONDS}})
      const store = await runCliKilledAt(['deploy', HELLO, '--department', department], settings, point)
      try {
        const rowsAfterCrash = await store.outbox.list({limit: 1_000})
        const engine = await createEngine(store, settings, onPremHosts)
        const deployRow = rowsAfterCrash.find((row) => row.operation === 'deploy')
        if (deployRow) {
          const result = await runDeployTask(engine, {
            outboxId: deployRow.id,
            companyId: deployRow.company_id!,
            departmentId: deployRow.department_id!,
            messageId: deployRow.id,
          })
          expect(result.outcome).toBe('completed')
        } else {
          expect(point.startsWith('submit.')).toBe(true)
          expect((await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})).state).toBe('completed')
        }

        const worker = (await store.workers.list()).find((row) => row.department_id === department)!
        const versions = await store.workers.listVersions(worker.id)
        expect(versions.filter((version) => version.state === 'deployed')).toHaveLength(1)
        expect(worker).toMatchObject({status: 'active', current_version_id: versions.find((version) => version.state === 'deployed')!.id})
        const deploys = (await store.outbox.list({operation: 'deploy', limit: 1_000})).filter((row) => row.department_id === department)
        expect(deploys.map((row) => row.status)).toEqual(['completed'])
        // No row lost: everything the crashed run wrote is still there.
        const after = new Set((await store.outbox.list({limit: 1_000})).map((row) => row.id))
        for (const row of rowsAfterCrash) expect(after.has(row.id)).toBe(true)

        const response = await fetch(`${host.publicUrl}/${worker.script_name}/`)
        expect(await response.text()).toBe('Hello from an Edge Worker! (GET /)\n')
      } finally {
        await store.close()
      }
    })
  }
})
