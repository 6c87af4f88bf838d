// Does a claim get slower as the outbox's history grows? ROUNDS backlogs of ROWS due deploy rows over
// the same 100 Workers, each drained by one kit runner at concurrency 1 (as bench/scale/run.ts's
// kit), on one embedded PostgreSQL logging every statement's duration: history grows by ROWS
// settled rows per round. Prints, per round, rows/s and the server's time per statement kind.
//
//   node --import tsx bench/scale/history.ts [--rows 1000] [--rounds 4]
import {spawn} from 'node:child_process'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {createInterface} from 'node:readline'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'
import {createDatabase, postgresServer} from '../support/store-baseline.js'
import {StatementLog} from '../support/statement-log.js'
import {machineLoad} from '../support/stats.js'
import {fillOutbox, seedWorkers} from './backlog.js'

const {values: options} = parseArgs({options: {rows: {type: 'string', default: '1000'}, rounds: {type: 'string', default: '4'}}})
const ROWS = Number(options.rows)
const ROUNDS = Number(options.rounds)
const SCOPE = 'onprem:0123456789ab'
const here = path.dirname(fileURLToPath(import.meta.url))
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-history-'))

if (process.env.EDGEWORKERS_BENCH_PG_URL) throw new Error('bench/scale/history.ts reads statement durations from the server log: it needs its embedded server')
const statements = new StatementLog()
const postgres = await postgresServer({flags: [StatementLog.FLAG], onLog: statements.onLog})

try {
  const url = await createDatabase(postgres.adminUrl, 'edgeworkers_bench_history')
  const store = await openStore(settingsSchema.parse({data_dir: workDir, store: {url}}))
  await store.migrate()
  await seedWorkers(store, 'bench')
  await store.close()
  console.log(`\n${new Date().toISOString()}, ${machineLoad()}; ${ROWS} rows per round, concurrency 1\n`)
  console.log('| round | settled rows before it | rows/s | statement | per drain | server ms | µs each |')
  console.log('|---|---|---|---|---|---|---|')
  for (let round = 0; round < ROUNDS; round++) {
    await fillOutbox({url, workDir, scope: SCOPE, company: 'bench', label: `history-${round}`, rows: ROWS})
    const runner = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'kit-runner.ts'), url, workDir, SCOPE, '1'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const lines = createInterface({input: runner.stdout})[Symbol.asyncIterator]()
    await lines.next()
    statements.start()
    const started = performance.now()
    runner.stdin.write('go\n')
    const report = JSON.parse((await lines.next()).value as string) as {completed: number}
    const seconds = (performance.now() - started) / 1000
    const top = (await statements.stop()).slice(0, 4)
    if (report.completed !== ROWS) throw new Error(`round ${round + 1}: ${report.completed} of ${ROWS} rows completed`)
    for (const [i, {kind, count, ms}] of top.entries()) {
      const lead = i === 0 ? `| ${round + 1} | ${(round * ROWS).toLocaleString('en')} | ${(ROWS / seconds).toFixed(0)}` : '| | |'
      console.log(`${lead} | \`${kind}\` | ${count} | ${ms.toFixed(0)} | ${((ms / count) * 1000).toFixed(0)} |`)
    }
  }
} finally {
  await postgres.stop()
  rmSync(workDir, {recursive: true, force: true})
}
