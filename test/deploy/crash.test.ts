// Crash safety of the deploy path: the real CLI is SIGKILLed at each stage (EDGEWORKERS_FAULT), then
// a later run converges — the version is deployed exactly once, the row is terminal, nothing is
// downgraded and no outbox row is lost. And of asset object cleanup after a deploy killed before
// its commit: the cleanup killed right after a delete has deleted nothing a version serves, and a
// later pass deletes the rest.
import {existsSync, mkdtempSync, utimesSync} from 'node:fs'
import {tmpdir} from 'node:os'
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
import {writeAssetsSite} from '../support/cli.js'
import {artifactKeyFor, artifactsDirOf} from '../../src/artifacts/store.js'
import {sha256Hex} from '../../src/canonical-json.js'
import {runPass} from '../../src/engine/pass/index.js'

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

const SITES = mkdtempSync(path.join(tmpdir(), 'edgeworkers-crash-sites-'))

const site = (name: string, files: Record<string, string>) => writeAssetsSite(SITES, name, files)

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

  test('killed right after deleting an asset object: nothing a retained version serves is gone, and a later pass deletes the rest', async () => {
    await kit.pair()
    const department = await kit.department()
    const settings = kit.settings({deploy: {lease_seconds: 1}, artifact_cleanup: {grace_seconds: 1}})
    const env = {EDGEWORKERS_ARTIFACT_CLEANUP__GRACE_SECONDS: '1'}
    const objectOf = (content: string) => path.join(artifactsDirOf(settings.data_dir), ...artifactKeyFor('asset', sha256Hex(content)).split('/'))
    const served = ['a: served by the deployed version', 'b: served, and sent again by the killed deploy']
    const unserved = ['c: only the killed deploy had it', 'd: only the killed deploy had it too', 'e: and a third']

    const engine = await createEngine(t.store, settings, onPremHosts)
    expect(
      (await deployWorker(engine, {projectDir: site(`${department}-first`, {'a.txt': served[0]!, 'b.txt': served[1]!}), departmentId: department, wait: true}))
        .state,
    ).toBe('completed')
    const killedDeploy = site(`${department}-killed`, {'b.txt': served[1]!, 'c.txt': unserved[0]!, 'd.txt': unserved[1]!, 'e.txt': unserved[2]!})
    await (await runCliKilledAt(['deploy', killedDeploy, '--department', department], settings, 'submit.after_artifacts', env)).close()
    // Every object put a minute ago: past the grace, so only the references decide.
    const minuteAgo = new Date(Date.now() - 60_000)
    for (const content of [...served, ...unserved]) utimesSync(objectOf(content), minuteAgo, minuteAgo)

    const store = await runCliKilledAt(['reconcile', '--lane', 'artifact_cleanup'], settings, 'cleanup.after_asset_delete', env)
    try {
      for (const content of served) expect(existsSync(objectOf(content)), content).toBe(true)
      expect(unserved.filter((content) => !existsSync(objectOf(content)))).toHaveLength(1)

      const later = await runPass(await createEngine(store, settings, onPremHosts), {lanes: ['artifact_cleanup']})
      expect(later.lanes[0]).toMatchObject({note: '2 unreferenced asset objects deleted'})
      for (const content of served) expect(existsSync(objectOf(content)), content).toBe(true)
      for (const content of unserved) expect(existsSync(objectOf(content)), content).toBe(false)
      // The deployed version still serves its files.
      const worker = (await store.workers.list()).find((row) => row.department_id === department)!
      const response = await fetch(`${host.publicUrl}/${worker.script_name}/a.txt`)
      expect(await response.text()).toBe(served[0])
    } finally {
      await store.close()
    }
  })
})
