// One recovery pass over a backlog of WORKERS Workers × VERSIONS versions (a deploy row per
// version, queued version by version, as `deploy --no-wait` leaves them), with a no-op deploy task,
// on a fresh embedded PostgreSQL logging every statement's duration: the pass starts right after
// the backlog is queued, as an operator's would, before autovacuum has analysed the new rows. All
// but the newest row of each Worker yield a claim at a time. Prints the pass's wall time and the
// server's time per statement kind.
//
//   node --import tsx bench/scale/yields.ts [--workers 100] [--versions 50]
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {FileArtifactStore} from '../../src/artifacts/store.js'
import {settingsSchema} from '../../src/config/schema.js'
import {runnerIdentity, silentLogger} from '../../src/engine/context.js'
import {runPass} from '../../src/engine/pass/index.js'
import type {EdgeProvider} from '../../src/provider/types.js'
import {openStore, scriptNameFor} from '../../src/store/index.js'
import {leaseAndSettle, versionWithoutArtifacts} from '../support/passes.js'
import {StatementLog} from '../support/statement-log.js'
import {createDatabase, postgresServer} from '../support/store-baseline.js'
import {machineLoad} from '../support/stats.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'

const {values: options} = parseArgs({options: {workers: {type: 'string', default: '100'}, versions: {type: 'string', default: '50'}}})
const WORKERS = Number(options.workers)
const VERSIONS = Number(options.versions)
const SCOPE = 'onprem:0123456789ab'
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-yields-'))

if (process.env.EDGEWORKERS_BENCH_PG_URL) throw new Error('bench/scale/yields.ts reads statement durations from the server log: it needs its embedded server')
const statements = new StatementLog()
const postgres = await postgresServer({flags: [StatementLog.FLAG], onLog: statements.onLog})
try {
  const url = await createDatabase(postgres.adminUrl, 'edgeworkers_bench_yields')
  const settings = settingsSchema.parse({data_dir: workDir, store: {url}, reconcile: {lane_budget_seconds: 3_600}})
  const store = await openStore(settings)
  await store.migrate()
  await store.tenants.createCompany({id: 'bench', name: 'Bench'})
  const workers = []
  for (let w = 0; w < WORKERS; w++) {
    await store.tenants.createDepartment({id: `bench-${w}`, company_id: 'bench', name: `bench-${w}`})
    workers.push(
      await store.workers.create({company_id: 'bench', department_id: `bench-${w}`, script_name: scriptNameFor('bench', `bench-${w}`), status: 'new'}),
    )
  }
  for (let v = 0; v < VERSIONS; v++) {
    for (const worker of workers) {
      const version = await store.workers.createVersion(versionWithoutArtifacts(worker.id, `rg${v}`))
      await store.outbox.enqueue({
        operation: 'deploy',
        dedupe_key: `deploy:${worker.id}:${v}`,
        dispatch_namespace: SCOPE,
        company_id: 'bench',
        department_id: worker.department_id,
        worker_id: worker.id,
        version_id: version.id,
        script_name: worker.script_name,
        payload: {releaseGeneration: `rg${v}`, baseRevision: 0},
      })
    }
  }
  const engine = {
    store,
    settings,
    artifacts: await FileArtifactStore.open(workDir),
    log: silentLogger,
    owner: runnerIdentity(),
    hosts: onPremHosts,
    resolveProvider: async () => ({status: 'ready' as const, scope: SCOPE, provider: {scope: SCOPE} as EdgeProvider}),
  }
  statements.start()
  const started = performance.now()
  const lane = (await runPass(engine, {lanes: ['recovery'], dispatchDeploy: leaseAndSettle(SCOPE)})).lanes[0]!
  const seconds = (performance.now() - started) / 1000
  const times = await statements.stop()
  await store.close()
  if (lane.completed !== WORKERS * VERSIONS) throw new Error(`the pass completed ${lane.completed} of ${WORKERS * VERSIONS} rows: ${JSON.stringify(lane)}`)
  console.log(`\n${new Date().toISOString()}, ${machineLoad()}; ${WORKERS} Workers × ${VERSIONS} versions = ${WORKERS * VERSIONS} rows\n`)
  console.log(`one pass: **${seconds.toFixed(1)} s**, ${lane.claimed} claimed, ${lane.completed} completed\n`)
  console.log('| statement | count | server ms | µs each |')
  console.log('|---|---|---|---|')
  for (const {kind, count, ms} of times.slice(0, 8)) console.log(`| \`${kind}\` | ${count} | ${ms.toFixed(0)} | ${((ms / count) * 1000).toFixed(0)} |`)
} finally {
  await postgres.stop()
  rmSync(workDir, {recursive: true, force: true})
}
