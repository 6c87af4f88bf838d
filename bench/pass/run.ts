// Reconcile pass benchmarks.
//
// (a) Start-up: `node bin/run.js reconcile` with nothing to do (a migrated, paired SQLite store; no
//     rows), timed as a whole process from spawn to exit, against `node -e 0` spawned alternately in
//     the same run. Needs the build: `npm run build` first (dist/ and oclif.manifest.json).
// (b) Throughput: one in-process pass of the recovery lane over 10,000 stalled deploy rows (8,000
//     pending rows whose waiting `deploy` died before leasing them, 2,000 expired leases), with a
//     no-op-fast dispatch that does to each row what the deploy task does without a host: lease it
//     by id and settle it `completed`. SQLite (default pragmas: WAL, synchronous=FULL) and PostgreSQL
//     (EDGEWORKERS_BENCH_PG_URL, an admin URL; else an embedded server with fsync on). The baseline is
//     the raw rate of single-row durable UPDATE commits on the same database, measured right before
//     and after the pass (as bench/outbox does): disk latency on a shared machine swings too much for
//     rows/s alone to mean anything.
//
//   node --import tsx bench/pass/run.ts [--starts 15] [--rows 10000]
//
// Prints Markdown tables for BENCHMARKS.md.
import {spawn} from 'node:child_process'
import {existsSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {FileArtifactStore} from '../../src/artifacts/store.js'
import {settingsSchema} from '../../src/config/schema.js'
import {silentLogger, type Engine} from '../../src/engine/context.js'
import {runPass} from '../../src/engine/pass/index.js'
import type {EdgeProvider} from '../../src/provider/types.js'
import {openStore, type Backend, type Store} from '../../src/store/index.js'
import {leaseAndSettle, onEachBackend, seedBenchWorker} from '../support/passes.js'
import {postgresBaseline, sqliteBaseline} from '../support/store-baseline.js'
import {log, median} from '../support/stats.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'

const {values: options} = parseArgs({options: {starts: {type: 'string', default: '15'}, rows: {type: 'string', default: '10000'}}})
const STARTS = Number(options.starts)
const ROWS = Number(options.rows)
const EXPIRED_SHARE = 0.2
const SCOPE = 'onprem:0123456789ab'
const repoRoot = path.resolve(fileURLToPath(new URL('../..', import.meta.url)))
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-pass-'))

async function main(): Promise<void> {
  try {
    const startup = await benchStartup()
    const throughput = await onEachBackend(workDir, 'edgeworkers_bench_pass', benchThroughput)
    console.log(`\n${new Date().toISOString()}\n`)
    console.log('| process | runs | median ms | min ms | max ms |')
    console.log('|---|---|---|---|---|')
    for (const [name, times] of Object.entries(startup)) {
      console.log(`| \`${name}\` | ${times.length} | ${median(times).toFixed(0)} | ${Math.min(...times).toFixed(0)} | ${Math.max(...times).toFixed(0)} |`)
    }
    console.log(`\nratio of medians: ${(median(startup['edgeworkers reconcile']!) / median(startup['node -e 0']!)).toFixed(2)}\n`)
    console.log('| backend | rows | seconds | rows/s | baseline single-row commits/s | rows/s ÷ baseline |')
    console.log('|---|---|---|---|---|---|')
    for (const r of throughput) {
      const rate = r.rows / r.seconds
      console.log(
        `| ${r.backend} | ${r.rows} | ${r.seconds.toFixed(1)} | ${rate.toFixed(0)} | ${r.baselineCommitsPerSecond.toFixed(0)} | ${(rate / r.baselineCommitsPerSecond).toFixed(2)} |`,
      )
    }
  } finally {
    rmSync(workDir, {recursive: true, force: true})
  }
}

/** (a) Alternating spawns of the two processes, so both see the same machine conditions. */
async function benchStartup(): Promise<Record<string, number[]>> {
  if (!existsSync(path.join(repoRoot, 'dist/commands/reconcile.js')) || !existsSync(path.join(repoRoot, 'oclif.manifest.json'))) {
    throw new Error('bench (a) times the built CLI: run `npm run build` first')
  }
  const dataDir = path.join(workDir, 'startup')
  const store = await openStore(settingsSchema.parse({data_dir: dataDir}))
  await store.migrate()
  // Paired, so the pass runs every lane; the host is never contacted when there is nothing to do.
  await store.kit.savePairing({
    scope: SCOPE,
    host_url: 'http://127.0.0.1:9',
    host_fingerprint: 'f'.repeat(64),
    host_public_key: 'unused',
    shared_secret: 'a'.repeat(64),
  })
  await store.close()
  const processes: Record<string, string[]> = {
    'node -e 0': ['-e', '0'],
    'edgeworkers reconcile': [path.join(repoRoot, 'bin/run.js'), 'reconcile', '--data-dir', dataDir],
  }
  const times: Record<string, number[]> = {'node -e 0': [], 'edgeworkers reconcile': []}
  for (let i = 0; i < STARTS; i++) {
    for (const [name, args] of Object.entries(processes)) times[name]!.push(await timeProcess(args))
  }
  log(`startup: ${JSON.stringify(Object.fromEntries(Object.entries(times).map(([name, values]) => [name, median(values).toFixed(0)])))} ms (medians)`)
  return times
}

async function timeProcess(args: string[]): Promise<number> {
  const started = performance.now()
  const child = spawn(process.execPath, args, {stdio: 'ignore', env: {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined}})
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', resolve)
  })
  if (code !== 0) throw new Error(`${args.join(' ')} exited ${code}`)
  return performance.now() - started
}

/** (b) One pass of the recovery lane over ROWS stalled rows; seeding is not timed. */
async function benchThroughput(backend: Backend, url: string): Promise<{backend: Backend; rows: number; seconds: number; baselineCommitsPerSecond: number}> {
  // No budget cut-off: the point is the rate over every row.
  const settings = settingsSchema.parse({data_dir: workDir, store: {url}, reconcile: {lane_budget_seconds: 3_600}})
  await seedStalledRows(url)
  const store = await openStore(settings)
  try {
    const engine: Engine = {
      store,
      settings,
      artifacts: await FileArtifactStore.open(workDir),
      log: silentLogger,
      owner: 'bench-pass',
      hosts: onPremHosts,
      resolveProvider: async () => ({status: 'ready', scope: SCOPE, provider: {scope: SCOPE} as EdgeProvider}),
    }
    const baseline = async () => (backend === 'sqlite' ? sqliteBaseline(url) : await postgresBaseline(url))
    const before = await baseline()
    const started = performance.now()
    const result = await runPass(engine, {lanes: ['recovery'], dispatchDeploy: leaseAndSettle(SCOPE)})
    const seconds = (performance.now() - started) / 1000
    const baselineCommitsPerSecond = (before + (await baseline())) / 2
    const lane = result.lanes[0]!
    if (lane.completed !== ROWS || lane.error)
      throw new Error(`${backend}: the pass completed ${lane.completed} of ${ROWS} rows${lane.error ? `: ${lane.error}` : ''}`)
    log(`${backend}: ${ROWS} rows in ${seconds.toFixed(1)} s; baseline ${baselineCommitsPerSecond.toFixed(0)} commits/s`)
    return {backend, rows: ROWS, seconds, baselineCommitsPerSecond}
  } finally {
    await store.close()
  }
}

/** Rows written ten minutes in the past, so every one has stalled: its grace and any lease are over. */
async function seedStalledRows(url: string): Promise<void> {
  const tenMinutesAgo = {now: () => Date.now() - 600_000}
  const store: Store = await openStore(settingsSchema.parse({data_dir: workDir, store: {url}}), {clock: tenMinutesAgo})
  try {
    await store.migrate()
    const worker = await seedBenchWorker(store)
    for (let start = 0; start < ROWS; start += 1_000) {
      await store.transaction(async (tx) => {
        for (let i = start; i < Math.min(ROWS, start + 1_000); i++) {
          const {row} = await tx.outbox.enqueue({
            operation: 'deploy',
            dedupe_key: `deploy:${worker.id}:${worker.versionId}:${i}`,
            dispatch_namespace: SCOPE,
            company_id: 'bench',
            department_id: 'bench-ops',
            worker_id: worker.id,
            version_id: worker.versionId,
            script_name: worker.script_name,
            payload: {releaseGeneration: 'rg', baseRevision: i},
            reserved_by: 'deploy-that-died',
          })
          if (i < ROWS * EXPIRED_SHARE) await tx.outbox.leaseById(row.id, {scope: SCOPE, owner: 'runner-that-died', leaseSeconds: 90})
        }
      })
    }
  } finally {
    await store.close()
  }
}

await main()
