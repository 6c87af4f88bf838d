// EXPLAIN (ANALYZE, BUFFERS) of every sweep a pass runs, over 1,000,000 outbox rows on PostgreSQL:
// 990,000 settled (history), 4,000 due deploys handed to the passes, 2,000 expired deploy leases,
// 1,000 deferred (fenced) deploys, 3,000 due artifact cleanups; spread over 4 kit scopes. The plans
// are the server's own (auto_explain on the store's connections, analyze + buffers), of the real
// repository calls, so the SQL is exactly what the lanes send. Embedded server only.
//
//   node --import tsx bench/scale/explain.ts [--rows 1000000]
//
// Prints Markdown for BENCHMARKS.md.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import pg from 'pg'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'
import {createDatabase, postgresServer} from '../support/store-baseline.js'
import {machineLoad} from '../support/stats.js'

const {values: options} = parseArgs({options: {rows: {type: 'string', default: '1000000'}}})
const ROWS = Number(options.rows)
const SCOPES = ['onprem:00000000000a', 'onprem:00000000000b', 'onprem:00000000000c', 'onprem:00000000000d']
const SCOPE = SCOPES[0]!
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-explain-'))

if (process.env.EDGEWORKERS_BENCH_PG_URL) throw new Error('bench/scale/explain.ts reads the plans from the server log: it needs its embedded server')
let plan: string[] | null = null
const plans: string[] = []
const postgres = await postgresServer({
  onLog: (line) => {
    if (plan === null) return
    // auto_explain writes the statement and its plan as one multi-line log entry.
    if (/duration: [\d.]+ ms\s+plan:/.test(line) && plan.length > 0) plans.push(plan.join('\n'))
    if (/duration: [\d.]+ ms\s+plan:/.test(line)) plan = []
    if (plan !== null) plan.push(line.replace(/\s+$/, ''))
  },
})
try {
  const url = await createDatabase(postgres.adminUrl, 'edgeworkers_bench_explain')
  const store = await openStore(settingsSchema.parse({data_dir: workDir, store: {url}}))
  await store.migrate()
  await store.close()
  await seed(url)
  const explained = new URL(url)
  explained.searchParams.set(
    'options',
    '-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 -c auto_explain.log_analyze=on -c auto_explain.log_buffers=on -c auto_explain.log_nested_statements=on',
  )
  const sweeps = await openStore(settingsSchema.parse({data_dir: workDir, store: {url: explained.toString(), postgres_pool_max: 1}}))
  const calls: Array<[string, () => Promise<unknown>]> = [
    [
      'recovery claim (claimRecoverableDeployments, batch 50)',
      () =>
        sweeps.sweeps.claimRecoverableDeployments({
          scope: SCOPE,
          owner: 'explain',
          limit: 50,
          graceSeconds: 300,
          leaseSeconds: 90,
        }),
    ],
    ['deferred claim (claimDeferredDeployments)', () => sweeps.sweeps.claimDeferredDeployments({scope: SCOPE, owner: 'explain', leaseSeconds: 90})],
    [
      'artifact cleanup claim (outbox.claim, batch 100)',
      () => sweeps.outbox.claim({operation: 'artifact_cleanup', scope: SCOPE, owner: 'explain', limit: 100, leaseSeconds: 300}),
    ],
    ['rows left for an operator (countUnsettled)', () => sweeps.sweeps.countUnsettled(SCOPE, ['deploy', 'artifact_cleanup'])],
    ['deploys waiting for a later pass (waitingDeployments)', () => sweeps.sweeps.waitingDeployments({scope: SCOPE, graceSeconds: 300})],
  ]
  console.log(`\n${new Date().toISOString()}, ${machineLoad()}; ${ROWS.toLocaleString('en')} outbox rows, ${SCOPES.length} scopes\n`)
  for (const [name, call] of calls) {
    plans.length = 0
    plan = []
    await call()
    await new Promise((resolve) => setTimeout(resolve, 500))
    if (plan.length > 0) plans.push(plan.join('\n'))
    plan = null
    // The pool's connection check (`select 1`) is not a sweep.
    const sweepPlans = plans.filter((text) => !/Query Text: select 1$/m.test(text))
    console.log(`**${name}**\n\n\`\`\`\n${sweepPlans.join('\n\n')}\n\`\`\`\n`)
  }
  await sweeps.close()
} finally {
  await postgres.stop()
  rmSync(workDir, {recursive: true, force: true})
}

/** The rows, written in bulk by SQL (setup, not measured), then ANALYZE as autovacuum would. */
async function seed(url: string): Promise<void> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  const now = Date.now()
  const open = 10_000
  const insert = (count: number, offset: number, fields: string) => `
    insert into edge_worker_outbox (id, operation, status, dedupe_key, company_id, department_id, worker_id, version_id, script_name,
      dispatch_namespace, payload, attempts, lease_owner, lease_token, lease_expires_at, next_attempt_at, last_error_code, last_error, created_at, updated_at)
    select 'ob' || (i + ${offset}), ${fields}
    from generate_series(1, ${count}) as i`
  const scope = `(array['${SCOPES.join("','")}'])[1 + i % ${SCOPES.length}]`
  const deploy = `'w' || (i % 5000), 'v' || i, 's' || (i % 5000), ${scope}, '{"releaseGeneration":"rg","baseRevision":0}'`
  try {
    await client.query(
      insert(
        ROWS - open,
        0,
        `'deploy', 'completed', 'd' || i, 'c', 'd', ${deploy}, 1, 'old', null, null, null, null, null, ${now - 86_400_000} + i, ${now - 86_400_000} + i`,
      ),
    )
    await client.query(
      insert(
        4_000,
        ROWS,
        `'deploy', 'pending', 'd' || (i + ${ROWS}), 'c', 'd', ${deploy}, 0, null, null, null, ${now - 60_000}, null, null, ${now - 60_000} + i, ${now - 60_000}`,
      ),
    )
    await client.query(
      insert(
        2_000,
        ROWS + 4_000,
        `'deploy', 'leased', 'd' || (i + ${ROWS + 4_000}), 'c', 'd', ${deploy}, 1, 'dead', 'tok' || i, ${now - 30_000}, null, null, null, ${now - 120_000} + i, ${now - 120_000}`,
      ),
    )
    await client.query(
      insert(
        1_000,
        ROWS + 6_000,
        `'deploy', 'deferred', 'd' || (i + ${ROWS + 6_000}), 'c', 'd', ${deploy}, 0, null, null, null, ${now - 60_000}, 'edge_host_fenced', 'fenced', ${now - 60_000} + i, ${now - 60_000}`,
      ),
    )
    await client.query(
      insert(
        3_000,
        ROWS + 7_000,
        `'artifact_cleanup', 'pending', 'c' || i, null, null, null, null, null, ${scope}, '{"kind":"bundle"}', 0, null, null, null, ${now - 60_000}, null, null, ${now - 60_000} + i, ${now - 60_000}`,
      ),
    )
    await client.query('analyze edge_worker_outbox')
  } finally {
    await client.end()
  }
}
