// Gradual deployments against a real edge host running real workerd, on both store backends:
// `deploy --percentage` and `versions deploy A@90 B@10` split requests by the percentages (counted
// over 10,000 requests), a Cloudflare-Workers-Version-Key keeps one version, the
// Cloudflare-Workers-Version-Overrides header reaches a named one, `deployments promote` and
// `rollback` end a split, the tail and the metrics name the version that answered, and bad asks are
// refused with one line, exit 2, nothing written; a change of split obeys gates, fences and retirement.
import {existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, beforeEach, expect, test} from 'vitest'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {runPass} from '../../src/engine/pass/run-pass.js'
import {retireDepartment} from '../../src/engine/retire/retire-department.js'
import {rollbackWorker} from '../../src/engine/deploy/rollback.js'
import {deploymentStatus} from '../../src/engine/versions/deployments.js'
import {errorRateThreshold, workersPanel} from '../../src/engine/status/workers.js'
import {DEPLOYMENT_CHANGED_ACTION, deployVersions, promoteSplit} from '../../src/engine/versions/deploy-versions.js'
import {runCli} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const HELLO = path.join(FIXTURES_DIR, 'hello')
const HELLO_V2 = path.join(FIXTURES_DIR, 'hello-v2')
const COUNTER = path.join(FIXTURES_DIR, 'counter')
const V1 = 'Hello from an Edge Worker! (GET /)\n'
const V2 = 'Hello from Edge Workers, version 2!\n'
const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-gradual-'))
afterAll(() => rmSync(root, {recursive: true, force: true}))
const REQUESTS = 10_000
const CONCURRENCY = 32
/** 10,000 requests and several CLI runs: minutes on a loaded 2-vCPU machine. */
const SLOW = {timeout: 300_000}

describeEachStore('gradual deployments', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)
  const actor = {type: 'operator', id: 'alice'}

  beforeAll(async () => {
    host = await startTestHost({settings: {worker_log_file: path.join(root, `${t.backend}.log`)}})
  })
  afterAll(async () => {
    await host?.stop()
  })
  beforeEach(async () => {
    await kit.pair()
  })

  /** The answers to `count` requests of the Worker, with the headers `headersOf(i)` gives the i-th. */
  async function answers(script: string, count: number, headersOf: (i: number) => Record<string, string> = () => ({})): Promise<string[]> {
    const texts: string[] = new Array(count)
    let next = 0
    const worker = async () => {
      while (next < count) {
        const i = next++
        const response = await fetch(`${host.publicUrl}/${script}/`, {headers: headersOf(i)})
        texts[i] = await response.text()
      }
    }
    await Promise.all(Array.from({length: CONCURRENCY}, worker))
    return texts
  }

  async function split() {
    const engine = await kit.engine()
    const department = await kit.department()
    const v1 = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
    const v2 = await deployWorker(engine, {projectDir: HELLO_V2, departmentId: department, wait: true, percentage: 10})
    expect([v1.state, v2.state]).toEqual(['completed', 'completed'])
    return {engine, department, v1, v2, script: v1.scriptName}
  }

  test('deploy --percentage 10: 10 ± 1 % of 10,000 requests, a key on one version, overrides by version id', SLOW, async () => {
    const {engine, department, v1, v2, script} = await split()
    const status = await deploymentStatus(engine, department)
    expect(status.deployment?.versions.map((v) => [v.versionId, v.percentage])).toEqual([
      [v2.versionId, 10],
      [v1.versionId, 90],
    ])
    const versions = await t.store.workers.listVersions(v1.workerId)
    expect(versions.map((v) => v.state)).toEqual(['deployed', 'deployed'])
    // `status --json` and the TUI's Workers list carry the split.
    const panel = await workersPanel(engine, null, {threshold: errorRateThreshold(engine.settings)})
    expect(panel.workers.find((row) => row.department_id === department)?.deployment).toEqual([
      {version_id: v2.versionId, percentage: 10},
      {version_id: v1.versionId, percentage: 90},
    ])

    const drawn = await answers(script, REQUESTS)
    expect(new Set(drawn)).toEqual(new Set([V1, V2]))
    const share = drawn.filter((text) => text === V2).length / REQUESTS
    expect(share).toBeGreaterThanOrEqual(0.09)
    expect(share).toBeLessThanOrEqual(0.11)

    // 200 keys, 10 requests each: every key's requests land on one version; both versions have keys.
    const keyOf = (i: number) => `session-${i % 200}`
    const keyed = await answers(script, 2_000, (i) => ({'Cloudflare-Workers-Version-Key': keyOf(i)}))
    const versionOfKey = new Map<string, Set<string>>()
    for (const [i, text] of keyed.entries()) versionOfKey.set(keyOf(i), (versionOfKey.get(keyOf(i)) ?? new Set()).add(text))
    expect([...versionOfKey.values()].every((seen) => seen.size === 1)).toBe(true)
    const onV2 = [...versionOfKey].filter(([, seen]) => seen.has(V2)).map(([key]) => key)
    expect(onV2.length).toBeGreaterThan(0)
    expect(onV2.length).toBeLessThan(200)

    // The override reaches the named version, by script name or department, whatever the percentages say.
    for (const [name, version, text] of [
      [script, v2.versionId, V2],
      [department, v1.versionId, V1],
    ] as const) {
      const header = {'Cloudflare-Workers-Version-Overrides': `${name}="${version}"`}
      expect(new Set(await answers(script, 50, () => header))).toEqual(new Set([text]))
    }

    // 10 → 50 %: a change of its own (version, audit row), and every key the new version had, it keeps.
    const raised = await deployVersions(engine, {departmentId: department, specs: [`${v1.versionId}@50`, `${v2.versionId}@50`], wait: true, actor})
    expect(raised.state).toBe('completed')
    expect((await deploymentStatus(engine, department)).deployment?.versions.map((v) => v.percentage)).toEqual([50, 50])
    const rekeyed = await answers(script, onV2.length, (i) => ({'Cloudflare-Workers-Version-Key': onV2[i]!}))
    expect(new Set(rekeyed)).toEqual(new Set([V2]))
    expect((await t.store.audit.list({action: DEPLOYMENT_CHANGED_ACTION})).filter((row) => row.resource_id === v1.workerId)).toHaveLength(1)

    // Promote: the new version alone; the old one superseded.
    expect((await promoteSplit(engine, {departmentId: department, wait: true, actor})).state).toBe('completed')
    expect(new Set(await answers(script, 200))).toEqual(new Set([V2]))
    expect((await deploymentStatus(engine, department)).deployment?.versions.map((v) => v.percentage)).toEqual([100])
    expect((await t.store.workers.getVersion(v1.versionId))?.state).toBe('superseded')
  })

  test('rollback while a split is live serves the old version alone; the metrics and the tail name each version', SLOW, async () => {
    const {engine, department, v1, v2, script} = await split()
    await answers(script, 400)
    const byVersion = await versionResponses(script)
    expect(Object.keys(byVersion).sort()).toEqual([v1.versionId, v2.versionId].sort())
    // Every tail event (here, the host's Worker log file) names the version that ran.
    expect(await tailedVersions(script)).toEqual(new Set([v1.versionId, v2.versionId]))

    const rolledBack = await rollbackWorker(engine, {departmentId: department, wait: true, actor})
    expect(rolledBack).toMatchObject({state: 'completed', rolledBackTo: v1.versionId})
    expect(new Set(await answers(script, 200))).toEqual(new Set([V1]))
    const status = await deploymentStatus(engine, department)
    expect(status.deployment?.versions).toEqual([expect.objectContaining({versionId: rolledBack.versionId, percentage: 100})])
  })

  test('a change of split obeys the maintenance gate, waits out a fence, and ends with retirement', SLOW, async () => {
    const {engine, department, v1, v2, script} = await split()
    const scope = (await kit.pair()).scope
    const specs = [`${v1.versionId}@50`, `${v2.versionId}@50`]
    const percentages = async () => (await deploymentStatus(engine, department)).deployment?.versions.map((v) => v.percentage)
    const written = async () => ({versions: await t.store.workers.listVersions(v1.workerId), audit: await t.store.audit.list({})})

    // Maintenance: a new percentage, a promote and a rollback are each refused; nothing written.
    const before = await written()
    await t.store.kit.setGate(scope, 'maintenance', 'disk swap')
    for (const change of [
      () => deployVersions(engine, {departmentId: department, specs, wait: true, actor}),
      () => promoteSplit(engine, {departmentId: department, wait: true, actor}),
      () => rollbackWorker(engine, {departmentId: department, wait: true, actor}),
    ]) {
      await expect(change()).rejects.toMatchObject({reason: 'edge_workers_maintenance'})
    }
    await t.store.kit.setGate(scope, 'maintenance', null)
    expect(await written()).toEqual(before)

    // A fence defers the change: the host keeps serving 90/10 until the fence ends and the row runs.
    const fence = await t.store.kit.beginFence({scope, reason: 'backup', ttlSeconds: 60})
    const deferred = await deployVersions(engine, {departmentId: department, specs, wait: true, actor})
    expect(deferred.state).toBe('deferred')
    expect(await percentages()).toEqual([10, 90])
    expect(new Set(await answers(script, 200))).toEqual(new Set([V1, V2]))
    await t.store.kit.endFence(fence.id, 'done')
    expect((await runPass(engine, {lanes: ['deferred']})).lanes[0]).toMatchObject({claimed: 1, completed: 1})
    expect(await percentages()).toEqual([50, 50])

    // Retired: both versions stop answering (the byte-exact 404), and no change of split is taken.
    expect((await retireDepartment(engine, {departmentId: department})).state).toBe('retired')
    expect((await fetch(`${host.publicUrl}/${script}/`)).status).toBe(404)
    const header = {'Cloudflare-Workers-Version-Overrides': `${script}="${v1.versionId}"`}
    expect((await fetch(`${host.publicUrl}/${script}/`, {headers: header})).status).toBe(404)
    await expect(promoteSplit(engine, {departmentId: department, wait: true, actor})).rejects.toMatchObject({code: 'conflict'})
  })

  test('bad asks are refused with one line and exit 2, and nothing is written', SLOW, async () => {
    const engine = await kit.engine()
    const department = await kit.department()
    const settings = kit.settings()
    const cli = (...args: string[]) => runCli(args, {EDGEWORKERS_DATA_DIR: settings.data_dir, EDGEWORKERS_STORE__URL: settings.store.url})
    // The first deploy of a Worker has nothing to split with.
    const first = await cli('deploy', HELLO, '--department', department, '--percentage', '10')
    expect([first.code, first.stderr.trim()]).toEqual([2, 'error: the first deploy of a Worker serves 100 %: there is no version to split with'])
    const v1 = await deployWorker(engine, {projectDir: HELLO, departmentId: department, wait: true})
    const v2 = await deployWorker(engine, {projectDir: HELLO_V2, departmentId: department, wait: true})
    const before = {versions: await t.store.workers.listVersions(v1.workerId), outbox: await t.store.outbox.list(), audit: await t.store.audit.list({})}
    for (const [specs, message] of [
      [[`${v1.versionId}@50`, `${v2.versionId}@30`], 'the percentages add up to 80; they must add up to 100'],
      [[`${v1.versionId}@50`, `${v2.versionId}@25`, `${v2.versionId}@25`], 'a deployment holds one or two versions; 3 given'],
      [[`${v2.versionId}@100`], `version ${v2.versionId} is already current (release ${v2.releaseGeneration})`],
    ] as const) {
      const result = await cli('versions', 'deploy', department, ...specs)
      expect([result.code, result.stderr.trim()]).toEqual([2, `error: ${message}`])
    }
    const percentage = await cli('deploy', HELLO, '--department', department, '--percentage', '101')
    expect(percentage.code).toBe(2)
    expect(await cli('deployments', 'promote', department)).toMatchObject({code: 2, stderr: 'error: no split is live: nothing to promote\n'})
    expect(await t.store.workers.listVersions(v1.workerId)).toEqual(before.versions)
    expect(await t.store.outbox.list()).toEqual(before.outbox)
    expect(await t.store.audit.list({})).toEqual(before.audit)

    // A Worker with Durable Objects keeps one version, as on Cloudflare.
    const durable = await kit.department()
    expect((await deployWorker(engine, {projectDir: COUNTER, departmentId: durable, wait: true})).state).toBe('completed')
    const refused = await cli('deploy', HELLO, '--department', durable, '--percentage', '10')
    expect([refused.code, refused.stderr.trim()]).toEqual([2, 'error: a Worker with Durable Objects keeps one version: deploy it at 100 %'])
  })

  /** The version ids of the script's events in the Worker log file, once it holds 400 of them. */
  async function tailedVersions(script: string): Promise<Set<string | null | undefined>> {
    const file = path.join(root, `${t.backend}.log`)
    const deadline = Date.now() + 15_000
    for (;;) {
      const lines = existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : []
      const events = lines.filter((line) => line !== '').map((line) => JSON.parse(line) as {script: string; versionId?: string | null})
      const mine = events.filter((event) => event.script === script)
      if (mine.length >= 400 || Date.now() > deadline) return new Set(mine.map((event) => event.versionId))
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  /** The host's per-version response counts of the script (edgeworkers_host_worker_version_responses_total), once the tail Worker posted them. */
  async function versionResponses(script: string): Promise<Record<string, number>> {
    const deadline = Date.now() + 15_000
    for (;;) {
      const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
      const counts: Record<string, number> = {}
      for (const line of text.split('\n')) {
        const match = new RegExp(`^edgeworkers_host_worker_version_responses_total\\{[^}]*script="${script}"[^}]*version="([^"]+)"[^}]*\\} (\\d+)`).exec(line)
        if (match) counts[match[1]!] = (counts[match[1]!] ?? 0) + Number(match[2])
      }
      if (Object.values(counts).reduce((sum, n) => sum + n, 0) >= 400 || Date.now() > deadline) return counts
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
})
