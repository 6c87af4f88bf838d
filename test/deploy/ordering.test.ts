// The newest deploy of a Worker wins (docs/scheduling.md "Which deploy wins"), on a real host:
// an older deploy row settles superseded without uploading whether a waiting `deploy`, a pass or a
// retry runs it; a rollback is a new version and wins; two deploy tasks of one Worker never both
// upload (one waits); every completed deploy leaves an audit row; and under a seeded campaign of
// kill -9s of `deploy` (host restarts included) and then under 16 concurrent `reconcile` passes
// over a backlog, every Worker ends serving its newest version — no deadlock, no double upload, each
// row settled once.
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {execa} from 'execa'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {runDeployTask, WORKER_DEPLOY_BUSY} from '../../src/engine/deploy/task.js'
import type {FaultPoint} from '../../src/engine/faults.js'
import {runPass} from '../../src/engine/pass/index.js'
import {DEPLOY_AUDIT_ACTIONS, openStore, type Store} from '../../src/store/index.js'
import {CLI_BIN} from '../support/cli.js'
import {FaultProxy} from '../support/fault-proxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness, type SettingsOverrides} from '../support/kit.js'
import {AdvancedWallClock, describeEachStore} from '../support/stores.js'

/** Fast passes: short holds and leases, a 1 s backoff, so a killed or waiting row is due again soon. */
const FAST: SettingsOverrides = {
  deploy: {lease_seconds: 2, readiness_probe_interval_ms: 100},
  recovery: {dispatch_grace_seconds: 1, cooldown_seconds: 1, batch_size: 3},
  backoff: {ladder_seconds: [1], jitter_ratio: 0, max_attempts: 50},
}

/** Where the campaign's `deploy` runs are killed (the stages of crash.test.ts). */
const KILL_POINTS: FaultPoint[] = [
  'submit.after_artifacts',
  'deploy.after_lease',
  'deploy.after_commit_deploying',
  'deploy.after_upload',
  'deploy.after_readback',
  'deploy.before_settle',
]

const projectsRoot = mkdtempSync(path.join(tmpdir(), 'edgeworkers-ordering-'))
let projects = 0

/** A project whose Worker answers `text`. */
function project(text: string): string {
  const dir = path.join(projectsRoot, `p${++projects}`)
  mkdirSync(dir, {recursive: true})
  writeFileSync(
    path.join(dir, 'edgeworker.json'),
    JSON.stringify({
      name: 'ordering',
      main: 'index.js',
      modules: ['index.js'],
      compatibilityDate: '2026-11-01',
      builderPolicy: 'department-worker-project-v2.9',
      staticData: {},
      dependencies: {},
    }),
  )
  writeFileSync(path.join(dir, 'index.js'), `export default { fetch() { return new Response(${JSON.stringify(text)}) } }\n`)
  return dir
}

/** Host `script uploaded` log lines, counted per script and release generation. */
class UploadCounter {
  readonly counts = new Map<string, number>()
  record = (entry: Record<string, unknown>) => {
    if (entry.msg !== 'script uploaded') return
    const key = `${entry.script}@${entry.releaseGeneration}`
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1)
  }
  /** Script@generation keys uploaded more than once. */
  doubles(): string[] {
    return [...this.counts].filter(([, count]) => count > 1).map(([key]) => key)
  }
}

describeEachStore('the newest deploy wins', (t) => {
  let host: TestHost
  const uploads = new UploadCounter()
  const kit = new KitHarness(t, () => host)
  /** A store on the wall clock (leases and holds run out in real time, as for the CLI processes on it), with the fast backoff. */
  let store: Store
  let engine: Engine

  beforeAll(async () => {
    host = await startTestHost({onLog: uploads.record})
  })
  afterAll(async () => {
    await host?.stop()
    rmSync(projectsRoot, {recursive: true, force: true})
  })

  async function setUp(overrides: SettingsOverrides = FAST, hostUrl?: string, clock = new AdvancedWallClock()): Promise<void> {
    await kit.pair(hostUrl)
    const settings = kit.settings(overrides)
    store = await openStore(settings, {clock})
    engine = await createEngine(store, settings, onPremHosts)
  }

  async function tearDown(): Promise<void> {
    await store?.close()
  }

  const served = async (departmentId: string) => {
    const worker = await store.workers.getByDepartment(departmentId)
    return (await fetch(`${host.publicUrl}/${worker!.script_name}/`)).text()
  }

  /** Runs recovery passes until no deploy row of these departments is pending or leased. */
  async function converge(departments: string[]): Promise<void> {
    const deadline = Date.now() + 60_000
    for (;;) {
      const open = (await store.outbox.list({operation: 'deploy', limit: 10_000})).filter(
        (row) => departments.includes(row.department_id!) && (row.status === 'pending' || row.status === 'leased'),
      )
      if (open.length === 0) return
      if (Date.now() > deadline) throw new Error(`deploy rows still open: ${JSON.stringify(open.map((row) => [row.status, row.last_error_code]))}`)
      const pass = await runPass(engine, {lanes: ['recovery']})
      if (pass.lanes.every((lane) => lane.claimed === 0)) await new Promise((resolve) => setTimeout(resolve, 300))
    }
  }

  /**
   * The newest version that was enqueued serves, and every older enqueued one is superseded (or
   * failed) — no newer version was superseded by an older one. (A run killed between its build and
   * its enqueue leaves a `built` version nobody asked to deploy.)
   */
  async function expectNewestServes(departmentId: string, newestText: string): Promise<void> {
    const worker = (await store.workers.getByDepartment(departmentId))!
    const enqueued = new Set((await store.outbox.list({workerId: worker.id, operation: 'deploy', limit: 1_000})).map((row) => row.version_id))
    const versions = (await store.workers.listVersions(worker.id))
      .filter((version) => enqueued.has(version.id))
      .sort((a, b) => a.created_at - b.created_at || a.id.localeCompare(b.id))
    const newest = versions.at(-1)!
    expect(worker.current_version_id).toBe(newest.id)
    expect(newest.state).toBe('deployed')
    for (const older of versions.slice(0, -1)) expect(['superseded', 'failed']).toContain(older.state)
    expect(await served(departmentId)).toBe(newestText)
  }

  test('deploy --no-wait v1, deploy v2, reconcile: v1 settles superseded and v2 keeps serving', async () => {
    await setUp()
    try {
      const department = await kit.department()
      const v1 = await deployWorker(engine, {projectDir: project('v1'), departmentId: department, wait: false})
      expect(v1.state).toBe('pending')
      const v2 = await deployWorker(engine, {projectDir: project('v2'), departmentId: department, wait: true})
      expect(v2.state).toBe('completed')
      const pass = await runPass(engine, {lanes: ['recovery']})
      expect(pass.lanes[0]).toMatchObject({claimed: 1, completed: 1})

      expect(await store.outbox.get(v1.outboxId)).toMatchObject({status: 'cancelled', last_error_code: 'deploy_superseded'})
      expect((await store.workers.getVersion(v1.versionId))!.state).toBe('superseded')
      await expectNewestServes(department, 'v2')
      expect(uploads.counts.get(`${v1.scriptName}@${v1.releaseGeneration}`)).toBeUndefined()

      const audit = await store.audit.list({resourceId: v2.workerId, limit: 10})
      expect(audit.find((row) => row.action === DEPLOY_AUDIT_ACTIONS.deployed)?.facts).toMatchObject({
        version_id: v2.versionId,
        release_generation: v2.releaseGeneration,
        previous_version_id: null,
      })
      expect(audit.find((row) => row.action === DEPLOY_AUDIT_ACTIONS.superseded)?.facts).toMatchObject({
        version_id: v1.versionId,
        newer_version_id: v2.versionId,
      })
    } finally {
      await tearDown()
    }
  })

  test('a waiting deploy of an older version yields; a rollback is a new version and wins; history reads back', async () => {
    await setUp()
    try {
      const department = await kit.department()
      const v1Dir = project('one')
      const v1 = await deployWorker(engine, {projectDir: v1Dir, departmentId: department, wait: false})
      const v2 = await deployWorker(engine, {projectDir: project('two'), departmentId: department, wait: false})
      // The waiting path runs v1's row itself: it yields to the newer v2 without uploading.
      const yielded = await runDeployTask(engine, {outboxId: v1.outboxId, companyId: kit.companyId, departmentId: department, messageId: v1.outboxId})
      expect(yielded).toMatchObject({outcome: 'superseded', code: 'deploy_superseded', newerVersionId: v2.versionId})
      await converge([department])
      await expectNewestServes(department, 'two')

      // Deploying v1's project again is a rollback: a new version, newest, so it wins.
      const rollback = await deployWorker(engine, {projectDir: v1Dir, departmentId: department, wait: true})
      expect(rollback).toMatchObject({state: 'completed', reused: false, releaseGeneration: v1.releaseGeneration})
      expect(rollback.versionId).not.toBe(v1.versionId)
      await expectNewestServes(department, 'one')

      const history = (await store.audit.list({action: DEPLOY_AUDIT_ACTIONS.deployed, resourceId: v1.workerId, limit: 10})).reverse()
      expect(history.map((row) => [row.facts.version_id, row.facts.previous_version_id])).toEqual([
        [v2.versionId, null],
        [rollback.versionId, v2.versionId],
      ])
    } finally {
      await tearDown()
    }
  })

  test('two deploy tasks of one Worker at once: the second waits for the first to finish, then wins', async () => {
    const proxy = await new FaultProxy(() => host.adminUrl).start()
    let releaseUpload!: () => void
    const uploadHeld = new Promise<void>((resolve) => (releaseUpload = resolve))
    let uploadReached!: () => void
    const reached = new Promise<void>((resolve) => (uploadReached = resolve))
    proxy.rule = ({method}) =>
      method === 'PUT'
        ? {
            kind: 'before_forward',
            run: async () => {
              uploadReached()
              await uploadHeld
            },
          }
        : {kind: 'forward'}
    await setUp(FAST, proxy.url)
    try {
      const department = await kit.department()
      const v1 = await deployWorker(engine, {projectDir: project('first'), departmentId: department, wait: false})
      const first = runDeployTask(engine, {outboxId: v1.outboxId, companyId: kit.companyId, departmentId: department, messageId: v1.outboxId})
      await reached
      proxy.rule = () => ({kind: 'forward'})
      // v1 is uploading; v2 is enqueued after it and must not upload until v1 is settled.
      const v2 = await deployWorker(engine, {projectDir: project('second'), departmentId: department, wait: true})
      expect(v2).toMatchObject({state: 'pending', code: WORKER_DEPLOY_BUSY})
      releaseUpload()
      expect((await first).outcome).toBe('completed')
      await converge([department])
      await expectNewestServes(department, 'second')
      expect(await store.outbox.get(v2.outboxId)).toMatchObject({status: 'completed'})
    } finally {
      releaseUpload()
      await tearDown()
      await proxy.stop()
    }
  })

  test('a deploy whose release is replaced on the host while it waits for readiness ends superseded at once', async () => {
    const proxy = await new FaultProxy(() => host.adminUrl).start()
    let releaseProbe!: () => void
    const probeHeld = new Promise<void>((resolve) => (releaseProbe = resolve))
    let probeReached!: () => void
    const reached = new Promise<void>((resolve) => (probeReached = resolve))
    const clock = new AdvancedWallClock()
    await setUp(FAST, proxy.url, clock)
    try {
      const department = await kit.department()
      const v1 = await deployWorker(engine, {projectDir: project('replaced'), departmentId: department, wait: false})
      const held = `releaseGeneration=${encodeURIComponent(v1.releaseGeneration)}`
      proxy.rule = ({url}) =>
        url.includes(held)
          ? {
              kind: 'before_forward',
              run: async () => {
                probeReached()
                await probeHeld
              },
            }
          : {kind: 'forward'}
      const first = runDeployTask(engine, {outboxId: v1.outboxId, companyId: kit.companyId, departmentId: department, messageId: v1.outboxId})
      await reached
      // v1's runner is stuck in a probe past its lease (2 s): v2 is not held back by it, and replaces v1 on the host.
      clock.advance(2_500)
      const v2 = await deployWorker(engine, {projectDir: project('replacement'), departmentId: department, wait: true})
      expect(v2.state).toBe('completed')
      releaseProbe()
      // The readiness deadline is the default 600 s: only noticing the replacement ends this in time.
      expect(await first).toMatchObject({outcome: 'superseded', newerVersionId: v2.versionId})
      expect(await store.outbox.get(v1.outboxId)).toMatchObject({status: 'cancelled', last_error_code: 'deploy_superseded'})
      await expectNewestServes(department, 'replacement')
    } finally {
      releaseProbe()
      await tearDown()
      await proxy.stop()
    }
  })

  test('seeded kill -9 campaign: 4 deploys of 2 departments killed at random stages, host restarts included: each ends on its newest version', {
    timeout: 180_000,
  }, async () => {
    await setUp()
    try {
      const departments = [await kit.department(), await kit.department()]
      /** Department → what its newest enqueued version answers. */
      const newest = new Map<string, string>()
      let seed = 22
      const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31
      const settings = kit.settings(FAST)
      const env = {EDGEWORKERS_DATA_DIR: settings.data_dir, EDGEWORKERS_STORE__URL: settings.store.url, EDGEWORKERS_DEPLOY__LEASE_SECONDS: '2'}
      const deployRows = async (department: string) =>
        (await store.outbox.list({operation: 'deploy', limit: 10_000})).filter((row) => row.department_id === department).length
      for (let run = 0; run < 4; run++) {
        const department = departments[Math.floor(random() * departments.length)]!
        const text = `${department} #${run}`
        const before = await deployRows(department)
        // The moment of the kill -9: a stage of the deploy (EDGEWORKERS_FAULT), or none for a --no-wait run.
        const fault = KILL_POINTS[Math.floor(random() * (KILL_POINTS.length + 1))]
        const result = await execa('node', [CLI_BIN, 'deploy', project(text), '--department', department, '--json', ...(fault ? [] : ['--no-wait'])], {
          reject: false,
          env: {...env, EDGEWORKERS_FAULT: fault ?? ''},
        })
        expect(result.signal).toBe(fault ? 'SIGKILL' : null)
        // Killed before its enqueue, a run leaves no deploy to win (at most a built version).
        if ((await deployRows(department)) > before) newest.set(department, text)
        if (run % 2 === 1) await host.restart()
      }
      await converge(departments)
      expect(newest.size).toBeGreaterThan(0)
      for (const [department, text] of newest) await expectNewestServes(department, text)
    } finally {
      await tearDown()
    }
  })

  test('16 concurrent passes over a backlog of 6 Workers × 3 versions: newest wins, no deadlock, no double upload, each row settled once', {
    timeout: 120_000,
  }, async () => {
    await setUp()
    const runners: Array<{store: Store; engine: Engine; log: string[]}> = []
    try {
      const departments: string[] = []
      for (let i = 0; i < 6; i++) departments.push(await kit.department())
      const newest = new Map<string, string>()
      for (let round = 0; round < 3; round++) {
        for (const department of departments) {
          const text = `${department} v${round}`
          await deployWorker(engine, {projectDir: project(text), departmentId: department, wait: false})
          newest.set(department, text)
        }
      }
      const deadlocksBefore = await pgDeadlocks()
      for (let i = 0; i < 16; i++) {
        // Two rows at once per pass (of different Workers), and a pool to match: 16 passes stay within the server's connections.
        const settings = kit.settings({...FAST, reconcile: {deploy_concurrency: 2}, store: {postgres_pool_max: 3}})
        const runnerStore = await openStore(settings)
        const log: string[] = []
        const record = (_fields: object, message: string) => void log.push(message)
        const runnerEngine = await createEngine(runnerStore, settings, onPremHosts, {debug: record, info: record, warn: record, error: record})
        runners.push({store: runnerStore, engine: {...runnerEngine, owner: `pass-${i}`}, log})
      }
      // Each runner is one pass at a time, as a cron'd `reconcile` is; all sixteen start together.
      const open = async () =>
        (await store.outbox.list({operation: 'deploy', limit: 10_000})).some(
          (row) => departments.includes(row.department_id!) && (row.status === 'pending' || row.status === 'leased'),
        )
      const deadline = Date.now() + 90_000
      await Promise.all(
        runners.map(async (runner) => {
          while ((await open()) && Date.now() < deadline) {
            const pass = await runPass(runner.engine, {lanes: ['recovery']})
            if (pass.lanes.every((lane) => lane.claimed === 0)) await new Promise((resolve) => setTimeout(resolve, 300))
          }
        }),
      )
      expect(await open()).toBe(false)
      for (const [department, text] of newest) await expectNewestServes(department, text)
      // Settled exactly once: each row is completed (one `deployed` audit row) or yielded (one `deploy_superseded`).
      const rows = (await store.outbox.list({operation: 'deploy', limit: 10_000})).filter((row) => departments.includes(row.department_id!))
      const audits = [
        ...(await store.audit.list({action: DEPLOY_AUDIT_ACTIONS.deployed, limit: 10_000})),
        ...(await store.audit.list({action: DEPLOY_AUDIT_ACTIONS.superseded, limit: 10_000})),
      ]
      for (const row of rows) {
        expect(['completed', 'cancelled']).toContain(row.status)
        expect(audits.filter((audit) => audit.facts.outbox_id === row.id).map((audit) => audit.action)).toEqual([
          row.status === 'completed' ? DEPLOY_AUDIT_ACTIONS.deployed : DEPLOY_AUDIT_ACTIONS.superseded,
        ])
      }
      const lines = runners.flatMap((runner) => runner.log)
      expect([...new Set(lines.filter((line) => /deadlock|failed:/i.test(line)))]).toEqual([])
      if (t.backend === 'postgres') expect(await pgDeadlocks()).toBe(deadlocksBefore)
      const scripts = await Promise.all(departments.map(async (department) => (await store.workers.getByDepartment(department))!.script_name))
      expect(uploads.doubles().filter((key) => scripts.some((script) => key.startsWith(`${script}@`)))).toEqual([])
      // The newest version of each Worker was uploaded; the older ones mostly yielded before uploading.
      for (const script of scripts) expect([...uploads.counts.keys()].filter((key) => key.startsWith(`${script}@`)).length).toBeGreaterThanOrEqual(1)
    } finally {
      for (const runner of runners) await runner.store.close()
      await tearDown()
    }
  })

  /** Deadlocks PostgreSQL has detected in this database so far (0 on SQLite). */
  async function pgDeadlocks(): Promise<number> {
    if (t.backend !== 'postgres') return 0
    const {default: pg} = await import('pg')
    const client = new pg.Client({connectionString: t.url})
    await client.connect()
    try {
      // The statistics collector reports with a delay; take a fresh snapshot.
      await client.query('select pg_stat_clear_snapshot()')
      const result = await client.query<{deadlocks: string}>('select deadlocks from pg_stat_database where datname = current_database()')
      return Number(result.rows[0]!.deadlocks)
    } finally {
      await client.end()
    }
  }
})
