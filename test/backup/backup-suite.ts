// Backup and restore end to end, on both store backends, against a real edge host running real
// workerd and the built CLI: backup → wipe → restore into fresh dirs → a host started on the restored
// data dir serves the same Workers and Durable Object data; a backup taken while traffic flows is
// consistent; a restore against a running host redeploys what it lacks and retires what the store
// no longer owns.
import {appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {verifyRestore} from '../../src/engine/backup/verify.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker, type DeployOutcome} from '../../src/engine/deploy/deploy-worker.js'
import {KitError} from '../../src/errors.js'
import type {Inventory} from '../../src/protocol/management-api.js'
import {paths} from '../support/paths.js'
import {openStore, type Store} from '../../src/store/index.js'
import {CLI_BIN, runCli, type CliResult} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness, type SettingsOverrides} from '../support/kit.js'
import {describeStore} from '../support/stores.js'
import type {Backend} from '../../src/store/index.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const COUNTER = path.join(FIXTURES_DIR, 'counter')
const HELLO = path.join(FIXTURES_DIR, 'hello')
const FAST: SettingsOverrides = {deploy: {readiness_probe_interval_ms: 50}}

/** The suite for one store backend: each backend has its own test file, so the two run in parallel. */
export function backupAndRestoreSuite(backend: Backend): void {
  describeStore(backend, 'backup and restore', (t) => {
    let host: TestHost
    const kit = new KitHarness(t, () => host)
    const scratch = mkdtempSync(path.join(tmpdir(), 'edgeworkers-backup-test-'))
    const extraHosts: TestHost[] = []
    let scratchCount = 0
    const scratchPath = (label: string) => path.join(scratch, `${label}-${++scratchCount}`)

    beforeAll(async () => {
      host = await startTestHost()
    })
    afterAll(async () => {
      for (const extra of extraHosts) await extra.stop()
      await host?.stop()
      rmSync(scratch, {recursive: true, force: true})
    })

    /** The built CLI on a store and data dir (the harness's by default). */
    function cli(args: string[], target: {dataDir?: string; url?: string} = {}): Promise<CliResult> {
      return runCli([...args, '--data-dir', target.dataDir ?? t.settings().data_dir], {
        EDGEWORKERS_STORE__URL: target.url ?? t.url,
        EDGEWORKERS_DEPLOY__READINESS_PROBE_INTERVAL_MS: '50',
      })
    }

    async function deployed(engine: Engine, projectDir: string, departmentId?: string): Promise<DeployOutcome> {
      const outcome = await deployWorker(engine, {projectDir, departmentId: departmentId ?? (await kit.department()), wait: true})
      expect(outcome).toMatchObject({state: 'completed'})
      return outcome
    }

    async function counter(publicUrl: string, scriptName: string, method: 'GET' | 'POST' = 'GET'): Promise<number> {
      const response = await fetch(`${publicUrl}/${scriptName}/?name=visits`, {method})
      expect(response.status).toBe(200)
      return ((await response.json()) as {value: number}).value
    }

    async function backUp(): Promise<{dir: string; result: Record<string, any>}> {
      const dir = scratchPath('backup')
      const created = await cli(['backup', 'create', dir, '--json'])
      expect(created, created.stderr).toMatchObject({code: 0})
      return {dir, result: JSON.parse(created.stdout)}
    }

    /** A fresh store of this backend and a fresh data dir, for a restore to fill. */
    async function freshTarget(): Promise<{dataDir: string; url: string; open(): Promise<Store>}> {
      const dataDir = scratchPath('data')
      const url = await t.freshUrl()
      return {dataDir, url, open: () => t.open(t.settings({data_dir: dataDir, store: {url}}))}
    }

    /** A copy of the counter project whose code differs (a new release). */
    function counterVariant(note: string): string {
      const dir = scratchPath('counter-variant')
      cpSync(COUNTER, dir, {recursive: true})
      appendFileSync(path.join(dir, 'index.js'), `// ${note}\n`)
      return dir
    }

    async function inventoryOf(target: TestHost): Promise<Inventory> {
      const response = await target.client((await kit.pair()).shared_secret).call<Inventory>('GET', paths.inventory)
      expect(response.status).toBe(200)
      return response.body
    }

    test('backup, wipe, restore into fresh dirs: the restored host serves the same Workers and Durable Object data', {timeout: 240_000}, async () => {
      const {scope} = await kit.pair()
      const engine = await kit.engine(FAST)
      const visits = await deployed(engine, COUNTER)
      const greeter = await deployed(engine, HELLO)
      for (let i = 0; i < 3; i++) await counter(host.publicUrl, visits.scriptName, 'POST')
      const greeting = await (await fetch(`${host.publicUrl}/${greeter.scriptName}/hi`)).text()

      const {dir, result} = await backUp()
      expect(result).toMatchObject({scope, store: {backend: t.backend}, artifacts: 4, fenceId: expect.any(String)})
      expect(statSync(dir).mode & 0o777).toBe(0o700)
      const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'))
      expect(manifest).toMatchObject({format: 'edgeworkers-backup', formatVersion: 1, fenceId: result.fenceId, scope, store: {backend: t.backend}})
      expect(manifest.host.fingerprint).toBe((await kit.pair()).host_fingerprint)
      expect(manifest.files.every((file: {sha256: string}) => /^[0-9a-f]{64}$/.test(file.sha256))).toBe(true)
      expect(JSON.stringify(manifest)).not.toContain((await kit.pair()).shared_secret)
      // The fence it took is lifted on both sides.
      expect(await t.store.kit.openFence(scope)).toBeUndefined()
      expect((await inventoryOf(host)).fence).toBeNull()

      // Wipe: the host and its data go; the restore fills a new store, data dir and host data dir.
      const ports = {listen: `127.0.0.1:${host.host.listen.port}`, admin_listen: `127.0.0.1:${host.host.adminListen.port}`}
      await host.stop()
      // Restored while no host answers: the gate stays closed and the command says so (exit 10).
      const unverified = await freshTarget()
      const noHost = await cli(['backup', 'restore', dir, '--json'], unverified)
      expect(noHost, noHost.stderr).toMatchObject({code: 10})
      expect(JSON.parse(noHost.stdout).verification).toMatchObject({
        state: 'pending',
        code: 'edge_host_unreachable',
        message: expect.stringContaining('edge host unreachable'),
      })
      expect(await (await unverified.open()).kit.getGates(scope)).toMatchObject({restore_pending: true})

      const target = await freshTarget()
      const hostDataDir = scratchPath('host-data')
      const restored = await cli(['backup', 'restore', dir, '--host-data-dir', hostDataDir, '--json'], target)
      expect(restored, restored.stderr).toMatchObject({code: 7})
      expect(JSON.parse(restored.stdout)).toMatchObject({scope, hostDataDir, verification: {state: 'pending', code: 'edge_host_not_started'}})

      const store = await target.open()
      expect(await store.kit.getGates(scope)).toMatchObject({restore_pending: true})
      expect(await store.kit.getFence(result.fenceId)).toMatchObject({state: 'ended', end_reason: 'restored'})
      const restoredEngine = await createEngine(store, kit.settings({...FAST, data_dir: target.dataDir, store: {url: target.url}}), onPremHosts)
      const refused = await deployWorker(restoredEngine, {projectDir: HELLO, departmentId: await departmentOf(store, greeter.workerId), wait: true}).catch(
        (error: unknown) => error,
      )
      expect(refused).toBeInstanceOf(KitError)
      expect(refused).toMatchObject({code: 'gate_closed', reason: 'edge_workers_restore_pending'})

      host = await startTestHost({dataDir: hostDataDir, settings: ports})
      extraHosts.push(host)
      // Once the host is up, the next reconcile pass verifies the restore and opens the gate.
      const pass = await cli(['reconcile', '--json'], target)
      expect(pass, pass.stderr).toMatchObject({code: 0})
      expect(JSON.parse(pass.stdout).lanes.find((lane: {lane: string}) => lane.lane === 'host_reconcile')).toMatchObject({
        note: 'restore verified; the restore gate is open',
      })
      expect(await store.kit.getGates(scope)).toMatchObject({restore_pending: false})
      expect(await verifyRestore(restoredEngine)).toMatchObject({scope, state: 'not_pending'})

      expect(await counter(host.publicUrl, visits.scriptName)).toBe(3)
      expect(await counter(host.publicUrl, visits.scriptName, 'POST')).toBe(4)
      expect(await (await fetch(`${host.publicUrl}/${greeter.scriptName}/hi`)).text()).toBe(greeting)
      // Deploys are accepted again, and reach the restored host.
      const after = await deployWorker(restoredEngine, {
        projectDir: counterVariant('after restore'),
        departmentId: await departmentOf(store, visits.workerId),
        wait: true,
      })
      expect(after).toMatchObject({state: 'completed'})
      expect(await counter(host.publicUrl, visits.scriptName)).toBe(4)
    })

    test('a backup taken while traffic flows is consistent: deployed versions match the host, Durable Objects are intact', {timeout: 240_000}, async () => {
      await kit.pair()
      // The wall clock, not the harness's test clock: the backup (another process) must see the leases
      // of deploys in flight as live, as it would in production.
      const settings = kit.settings(FAST)
      const engine = await createEngine(await openStore(settings), settings, onPremHosts)
      const visits = await deployed(engine, COUNTER)
      const changing = await deployed(engine, HELLO)
      const before = await counter(host.publicUrl, visits.scriptName, 'POST')

      let flowing = true
      const traffic = (async () => {
        let requests = 0
        while (flowing) {
          await counter(host.publicUrl, visits.scriptName, 'POST')
          requests++
        }
        return requests
      })()
      // Deploys keep arriving too: completed before the fence, deferred by it, or refused by the fenced host and left to a pass.
      const deploys = (async () => {
        const outcomes: DeployOutcome[] = []
        for (let round = 0; flowing && round < 5; round++) {
          outcomes.push(
            await deployWorker(engine, {
              projectDir: counterVariant(`round ${round}`),
              departmentId: await departmentOf(t.store, changing.workerId),
              wait: true,
            }),
          )
        }
        return outcomes
      })()
      const {dir} = await backUp()
      flowing = false
      expect(await traffic).toBeGreaterThan(0)
      expect((await deploys).map((outcome) => outcome.state).filter((state) => !['completed', 'deferred', 'pending'].includes(state))).toEqual([])
      const after = await counter(host.publicUrl, visits.scriptName)

      const target = await freshTarget()
      const hostDataDir = scratchPath('host-data')
      const restored = await cli(['backup', 'restore', dir, '--host-data-dir', hostDataDir], target)
      expect(restored, restored.stderr).toMatchObject({code: 7})
      const restoredHost = await startTestHost({dataDir: hostDataDir})
      extraHosts.push(restoredHost)

      const store = await target.open()
      const scripts = new Map((await inventoryOf(restoredHost)).scripts.map((script) => [script.name, script]))
      const workers = (await store.workers.list()).filter((worker) => worker.current_version_id !== null)
      expect(workers.map((worker) => worker.script_name).sort()).toEqual([visits.scriptName, changing.scriptName].sort())
      for (const worker of workers) {
        const version = await store.workers.getVersion(worker.current_version_id!)
        expect(version?.state).toBe('deployed')
        expect(scripts.get(worker.script_name)).toMatchObject({state: 'active', releaseGeneration: version!.release_generation})
        await expect
          .poll(async () => (await inventoryOf(restoredHost)).scripts.find((script) => script.name === worker.script_name)?.liveReleaseGeneration)
          .toBe(version!.release_generation)
      }
      const restoredValue = await counter(restoredHost.publicUrl, visits.scriptName)
      expect(restoredValue).toBeGreaterThanOrEqual(before)
      expect(restoredValue).toBeLessThanOrEqual(after)
      await engine.store.close()
    })

    test('restore against a running host: what it lacks is redeployed, what the store no longer owns is retired', {timeout: 240_000}, async () => {
      const {scope} = await kit.pair()
      const engine = await kit.engine(FAST)
      const visits = await deployed(engine, COUNTER)
      const first = (await t.store.workers.getVersion((await t.store.workers.get(visits.workerId))!.current_version_id!))!
      // Under `fence run`, the backup joins the fence the run holds and leaves lifting it to the run.
      const dir = scratchPath('backup')
      const dataDir = t.settings().data_dir
      const run = await runCli(['fence', 'run', '--', process.execPath, CLI_BIN, 'backup', 'create', dir], {
        EDGEWORKERS_STORE__URL: t.url,
        EDGEWORKERS_DATA_DIR: dataDir,
      })
      expect(run, run.stderr).toMatchObject({code: 0})
      const fences = await t.store.kit.listFences(scope, 10)
      expect(fences).toHaveLength(1)
      expect(fences[0]).toMatchObject({state: 'ended', end_reason: 'ended'})
      expect(JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8')).fenceId).toBe(fences[0]!.id)

      // After the backup: a new release of the counter, and a Worker the backup never saw.
      const newer = await deployed(engine, counterVariant('after the backup'), await departmentOf(t.store, visits.workerId))
      expect(newer.releaseGeneration).not.toBe(first.release_generation)
      const unknown = await deployed(engine, HELLO)

      const target = await freshTarget()
      const restored = await cli(['backup', 'restore', dir, '--json'], target)
      expect(restored, restored.stderr).toMatchObject({code: 0})
      const result = JSON.parse(restored.stdout)
      expect(result.verification).toMatchObject({state: 'verified', redeployed: [{scriptName: visits.scriptName, versionId: first.id, outcome: 'completed'}]})
      expect(result.verification.retired).toContain(unknown.scriptName)

      const scripts = new Map((await inventoryOf(host)).scripts.map((script) => [script.name, script]))
      expect(scripts.get(visits.scriptName)).toMatchObject({state: 'active', releaseGeneration: first.release_generation})
      expect(scripts.get(unknown.scriptName)).toMatchObject({state: 'retired'})
      expect((await fetch(`${host.publicUrl}/${unknown.scriptName}/`)).status).toBe(404)

      // Again, over the store the first restore filled: replaced whole, and the host already agrees.
      const again = await cli(['backup', 'restore', dir, '--json'], target)
      expect(again, again.stderr).toMatchObject({code: 0})
      expect(JSON.parse(again.stdout).verification).toMatchObject({state: 'verified', redeployed: [], retired: []})
      const store = await target.open()
      expect(await store.kit.getGates(scope)).toMatchObject({restore_pending: false})
      expect((await store.workers.list()).map((worker) => worker.script_name)).toEqual([visits.scriptName])
    })

    test('bad input: one line, a documented exit code, nothing changed', {timeout: 240_000}, async () => {
      const {scope} = await kit.pair()
      const engine = await kit.engine(FAST)
      await deployed(engine, HELLO)
      const {dir} = await backUp()
      const oneLine = (result: CliResult, code: number, message: RegExp) => {
        expect(result.code, result.stderr).toBe(code)
        expect(result.stdout).toBe('')
        expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
        expect(result.stderr).toMatch(message)
      }
      const snapshotOfStore = async () => ({
        workers: await t.store.workers.list(),
        outbox: await t.store.outbox.list({limit: 1_000}),
        gates: await t.store.kit.getGates(scope),
        fences: await t.store.kit.listFences(scope, 100),
      })
      const storeBefore = await snapshotOfStore()

      const occupied = scratchPath('occupied')
      cpSync(HELLO, occupied, {recursive: true})
      const noManifest = scratchPath('no-manifest')
      cpSync(dir, noManifest, {recursive: true})
      rmSync(path.join(noManifest, 'manifest.json'))
      const malformed = scratchPath('malformed')
      cpSync(dir, malformed, {recursive: true})
      appendFileSync(path.join(malformed, 'manifest.json'), '}')
      const corrupt = scratchPath('corrupt')
      cpSync(dir, corrupt, {recursive: true})
      const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as {files: Array<{path: string}>}
      const storeFile = manifest.files.find((file) => file.path.startsWith('store/'))!.path
      appendFileSync(path.join(corrupt, storeFile), 'x')
      const hostDataDir = scratchPath('host-data')

      const [intoOccupied, noBackup, badManifest, badDigest, otherBackend, occupiedHostDir] = await Promise.all([
        cli(['backup', 'create', occupied]),
        cli(['backup', 'restore', noManifest, '--host-data-dir', hostDataDir]),
        cli(['backup', 'restore', malformed, '--host-data-dir', hostDataDir]),
        cli(['backup', 'restore', corrupt, '--host-data-dir', hostDataDir]),
        cli(['backup', 'restore', dir], {url: t.backend === 'sqlite' ? 'postgres://nobody@127.0.0.1:9/none' : path.join(scratch, 'other.sqlite')}),
        cli(['backup', 'restore', dir, '--host-data-dir', occupied]),
      ])
      oneLine(intoOccupied, 2, new RegExp(`^error: backup directory ${occupied} is not empty`))
      oneLine(noBackup, 2, /is not a backup: it has no manifest\.json/)
      oneLine(badManifest, 2, /manifest\.json is malformed/)
      oneLine(badDigest, 2, new RegExp(`backup file ${storeFile} does not match its digest in manifest\\.json`))
      oneLine(otherBackend, 2, new RegExp(`the backup holds a ${t.backend} store`))
      oneLine(occupiedHostDir, 2, new RegExp(`host data dir ${occupied} is not empty`))

      // Nothing changed: the store, the fences, the directories given.
      expect(await snapshotOfStore()).toEqual(storeBefore)
      expect(existsSync(hostDataDir)).toBe(false)
      expect(readFileSync(path.join(occupied, 'edgeworker.json'), 'utf8')).toBe(readFileSync(path.join(HELLO, 'edgeworker.json'), 'utf8'))

      if (t.backend === 'sqlite') {
        // The harness keeps the SQLite file open: replacing it under an open connection is refused.
        oneLine(await cli(['backup', 'restore', dir]), 6, /is open in another process/)
      } else {
        const target = await freshTarget()
        await t.exec(
          `create table kysely_migration (name varchar(255) primary key, timestamp varchar(255) not null); insert into kysely_migration values ('0001_initial', 'x')`,
          target.url,
        )
        oneLine(await cli(['backup', 'restore', dir], target), 4, /is at schema \[0001_initial\]/)
      }
      expect(await snapshotOfStore()).toEqual(storeBefore)
    })
  })
}

async function departmentOf(store: Store, workerId: string): Promise<string> {
  return (await store.workers.get(workerId))!.department_id
}
