// `edgeworkers reconcile` through the real CLI (a child process per run) on SQLite data dirs: output,
// --json, the metrics file, every documented exit code, bad input refused with one line and nothing
// done, and --watch stopped by SIGTERM. No host is involved: the rows used settle without one
// (artifact cleanups, a deploy whose Worker is gone); the paired host's address answers nothing.
import {spawn} from 'node:child_process'
import {existsSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import {afterAll, describe, expect, test} from 'vitest'
import {FileArtifactStore} from '../../src/artifacts/store.js'
import {sha256Hex} from '../../src/canonical-json.js'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore, scriptNameFor, type Store} from '../../src/store/index.js'
import {CLI_BIN as CLI, runCli as cli, type CliResult} from '../support/cli.js'

// Every run is a fresh Node process compiling TypeScript (bin/dev.js): slow on a loaded 2-core machine.
const CLI_TEST_TIMEOUT_MS = 180_000
const SCOPE = 'onprem:0123456789ab'

function expectOneLineError(result: CliResult, code: number, text: string | RegExp): void {
  expect(result.code).toBe(code)
  expect(result.stdout).toBe('')
  expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
  expect(result.stderr).toMatch(text)
}

/** The JSON log lines the CLI wrote on stderr. */
function logLines(stderr: string): Array<{level: number; msg: string}> {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as {level: number; msg: string})
}

const opened: Store[] = []
afterAll(async () => {
  await Promise.all(opened.map((store) => store.close()))
})

/** A migrated SQLite data dir paired with a (never contacted) host, with an orphaned artifact and its due cleanup intent. */
async function kit(): Promise<{dataDir: string; store: Store; orphan: string; run: (...args: string[]) => Promise<CliResult>}> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-reconcile-'))
  const store = await openStore(settingsSchema.parse({data_dir: dataDir}))
  opened.push(store)
  await store.migrate()
  await store.kit.savePairing({
    scope: SCOPE,
    host_url: 'http://127.0.0.1:9',
    host_fingerprint: 'f'.repeat(64),
    host_public_key: 'unused',
    shared_secret: 'a'.repeat(64),
  })
  const artifacts = await FileArtifactStore.open(dataDir)
  const orphan = await artifacts.put('bundle', Buffer.from('orphaned bundle'))
  await store.outbox.enqueue({
    operation: 'artifact_cleanup',
    dedupe_key: 'artifact-cleanup:v-gone:bundle',
    dispatch_namespace: SCOPE,
    payload: {kind: 'bundle', object_key: orphan, digest: sha256Hex('orphaned bundle')},
  })
  return {dataDir, store, orphan, run: (...args) => cli([...args, '--data-dir', dataDir])}
}

/** A deploy row whose Worker was hard-deleted with its company: the pass settles it failed (worker_deleted). */
async function deployOfDeletedWorker(store: Store): Promise<string> {
  await store.tenants.createCompany({id: 'gone', name: 'Gone'})
  await store.tenants.createDepartment({id: 'gone-ops', company_id: 'gone', name: 'Ops'})
  const worker = await store.workers.create({company_id: 'gone', department_id: 'gone-ops', script_name: scriptNameFor('gone', 'gone-ops'), status: 'new'})
  const {row} = await store.outbox.enqueue({
    operation: 'deploy',
    dedupe_key: `deploy:${worker.id}:v:0`,
    dispatch_namespace: SCOPE,
    company_id: 'gone',
    department_id: 'gone-ops',
    worker_id: worker.id,
    version_id: 'v',
    script_name: worker.script_name,
    payload: {releaseGeneration: 'rg', baseRevision: 0},
  })
  await store.tenants.purgeCompany('gone')
  return row.id
}

describe('edgeworkers reconcile', {timeout: CLI_TEST_TIMEOUT_MS}, () => {
  test('runs every lane, prints the summary, writes the metrics file, and exits 0 — or 7 with --detailed-exitcode while rows are left failed', async () => {
    const {dataDir, store, orphan, run} = await kit()
    const deployId = await deployOfDeletedWorker(store)
    const metrics = path.join(dataDir, 'reconcile.prom')

    const text = await run('reconcile', '--metrics-file', metrics)
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^LANE +CLAIMED +COMPLETED +RETRIED +FAILED +UNCERTAIN +SKIPPED +DURATION +NOTE\n/)
    expect(text.stdout).toMatch(/^recovery +1 +0 +0 +1 +0 +0 +\d+ ms$/m)
    expect(text.stdout).toMatch(/^artifact_cleanup +1 +1 +0 +0 +0 +0 +\d+ ms$/m)
    // The host reconcile lane ran too (its rules, and what it makes of this unreachable host, are tested with it).
    expect(text.stdout).toMatch(/^host_reconcile +\d+ /m)
    expect(text.stdout).toContain(`left in scope ${SCOPE}: 1 failed, 0 uncertain`)
    expect(logLines(text.stderr).map((line) => line.msg)).toContain('Edge Worker deployment failed: the Worker row no longer exists')
    expect(await store.outbox.get(deployId)).toMatchObject({status: 'failed', last_error_code: 'worker_deleted'})
    expect(existsSync(path.join(dataDir, 'artifacts', ...orphan.split('/')))).toBe(false)

    const prom = readFileSync(metrics, 'utf8')
    expect(prom).toContain('edgeworkers_reconcile_lane_rows{lane="recovery",outcome="failed"} 1\n')
    expect(prom).toContain('edgeworkers_reconcile_lane_rows{lane="artifact_cleanup",outcome="completed"} 1\n')
    expect(prom).toMatch(/^edgeworkers_reconcile_lane_last_success_timestamp_seconds\{lane="artifact_cleanup"\} \d+(\.\d+)?$/m)
    expect(prom).toContain('edgeworkers_reconcile_rows_unsettled{status="failed"} 1\n')

    const [detailed, json] = await Promise.all([
      run('reconcile', '--detailed-exitcode', '--lane', 'recovery'),
      run('reconcile', '--json', '--lane', 'artifact_cleanup', '--detailed-exitcode'),
    ])
    expect(detailed.code).toBe(7)
    // The failed row is a deploy: a pass over the cleanup lane alone has nothing left in its scope.
    expect(json.code).toBe(0)
    expect(JSON.parse(json.stdout)).toMatchObject({
      status: 'ran',
      scope: SCOPE,
      lanes: [{lane: 'artifact_cleanup', claimed: 0}],
      remaining: {failed: 0, uncertain: 0},
    })
  })

  test('an invalid provider skips the pass: exit 11, the reference log line, nothing claimed', async () => {
    const {dataDir, store} = await kit()
    const skipped = await cli(['reconcile', '--data-dir', dataDir], {EDGEWORKERS_PROVIDER__SCOPE: 'onprem:ffffffffffff'})
    expect(skipped.code).toBe(11)
    expect(skipped.stdout).toBe('pass skipped: edge_workers_provider_invalid: provider.scope onprem:ffffffffffff was never paired with this store\n')
    expect(logLines(skipped.stderr).map((line) => line.msg)).toEqual(['Edge Worker recovery skipped: edge_workers_provider_invalid'])
    expect(await store.outbox.list({status: 'pending'})).toMatchObject([{operation: 'artifact_cleanup', attempts: 0}])
  })

  test('a lane that raises exits 12; the other lanes still ran', async () => {
    const {dataDir, store, orphan, run} = await kit()
    // A row the store cannot even read back (its payload is not JSON) makes the recovery lane raise.
    const {row} = await store.outbox.enqueue({operation: 'deploy', dedupe_key: 'deploy:corrupt', dispatch_namespace: SCOPE, payload: {}})
    const raw = new Database(path.join(dataDir, 'edgeworkers.sqlite'))
    raw.prepare(`update edge_worker_outbox set payload = 'not json' where id = ?`).run(row.id)
    raw.close()

    const result = await run('reconcile', '--json')
    expect(result.code).toBe(12)
    const summary = JSON.parse(result.stdout) as {lanes: Array<{lane: string; error?: string; completed: number}>}
    expect(summary.lanes.find((lane) => lane.lane === 'recovery')!.error).toMatch(/JSON/)
    expect(summary.lanes.find((lane) => lane.lane === 'artifact_cleanup')).toMatchObject({completed: 1})
    expect(logLines(result.stderr).some((line) => line.level === 40 && line.msg.startsWith('Edge Worker recovery failed: '))).toBe(true)
    expect(existsSync(path.join(dataDir, 'artifacts', ...orphan.split('/')))).toBe(false)
  })

  test('bad input is refused with one line and nothing is done', async () => {
    const {dataDir, store, run} = await kit()
    const notADir = path.join(dataDir, 'file')
    writeFileSync(notADir, '')
    const [lane, interval, intervalWithoutWatch, metrics] = await Promise.all([
      run('reconcile', '--lane', 'recovery', '--lane', 'bogus'),
      run('reconcile', '--watch', '--interval', '0'),
      run('reconcile', '--interval', '10'),
      run('reconcile', '--metrics-file', path.join(notADir, 'x.prom')),
    ])
    expectOneLineError(lane, 2, /^error: Expected --lane=bogus to be one of: recovery, deferred, artifact_cleanup, control_audit, host_reconcile/)
    expectOneLineError(interval, 2, 'error: Parsing --interval: 0 is shorter than 1 s')
    expectOneLineError(intervalWithoutWatch, 2, 'error: All of the following must be provided when using --interval: --watch')
    expectOneLineError(metrics, 2, `error: metrics file ${path.join(notADir, 'x.prom')} is not writable: ${notADir} is not a directory`)
    expect(await store.outbox.list({status: 'pending'})).toHaveLength(1)
  })

  test('--watch runs passes until SIGTERM, one JSON line each, then exits 143 with one line', async () => {
    const {dataDir, store} = await kit()
    const metrics = path.join(dataDir, 'watch.prom')
    const child = spawn(process.execPath, [CLI, 'reconcile', '--watch', '--interval', '1', '--json', '--metrics-file', metrics, '--data-dir', dataDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined},
    })
    let stdout = ''
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    await new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk) => {
        stdout += chunk
        if (stdout.split('\n').length > 2) resolve()
      })
    })
    let stderr = ''
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.kill('SIGTERM')
    expect(await exited).toBe(143)
    expect(stderr.trimEnd().split('\n').at(-1)).toBe(
      'interrupted by SIGTERM: the watch stopped after its current pass; rows it had not started were given back to the next pass',
    )
    const passes = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as {status: string; lanes: Array<{lane: string; completed: number}>})
    expect(passes.length).toBeGreaterThanOrEqual(2)
    expect(passes.every((pass) => pass.status === 'ran')).toBe(true)
    expect(passes[0]!.lanes.find((lane) => lane.lane === 'artifact_cleanup')!.completed).toBe(1)
    expect(readFileSync(metrics, 'utf8')).toContain('edgeworkers_reconcile_pass_skipped 0\n')
    expect(await store.outbox.list({status: 'pending'})).toEqual([])
  })
})
