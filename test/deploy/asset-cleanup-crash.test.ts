// Crash safety of asset object cleanup: a deploy killed after storing its asset files (never
// committed) leaves objects no version serves; `reconcile --lane artifact_cleanup` SIGKILLed right
// after deleting the first of them has deleted nothing a retained version serves, and a later pass
// deletes the rest — on both stores, with a real host and the real CLI.
import {existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {artifactKeyFor, artifactsDirOf} from '../../src/artifacts/store.js'
import {sha256Hex} from '../../src/canonical-json.js'
import {createEngine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {runPass} from '../../src/engine/pass/index.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {runCliKilledAt} from '../support/crash.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'

/** An assets-only wrangler site serving these files. */
function site(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-asset-crash-'))
  mkdirSync(path.join(dir, 'public'))
  writeFileSync(path.join(dir, 'wrangler.toml'), 'name = "site"\ncompatibility_date = "2026-11-01"\n[assets]\ndirectory = "public"\n')
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(dir, 'public', name), content)
  return dir
}

describeEachStore('asset object cleanup crash safety', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost()
  })
  afterAll(async () => {
    await host?.stop()
  })

  test('killed right after deleting an asset object: nothing a retained version serves is gone, and a later pass deletes the rest', async () => {
    await kit.pair()
    const department = await kit.department()
    const settings = kit.settings({deploy: {lease_seconds: 1}, artifact_cleanup: {grace_seconds: 1}})
    const env = {EDGEWORKERS_ARTIFACT_CLEANUP__GRACE_SECONDS: '1'}
    const objectOf = (content: string) => path.join(artifactsDirOf(settings.data_dir), ...artifactKeyFor('asset', sha256Hex(content)).split('/'))
    const served = ['a: served by the deployed version', 'b: served, and sent again by the killed deploy']
    const unserved = ['c: only the killed deploy had it', 'd: only the killed deploy had it too', 'e: and a third']

    const engine = await createEngine(t.store, settings, onPremHosts)
    expect((await deployWorker(engine, {projectDir: site({'a.txt': served[0]!, 'b.txt': served[1]!}), departmentId: department, wait: true})).state).toBe(
      'completed',
    )
    const killedDeploy = site({'b.txt': served[1]!, 'c.txt': unserved[0]!, 'd.txt': unserved[1]!, 'e.txt': unserved[2]!})
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
