// Several kits on one PostgreSQL database: per-kit throughput of 4 kits (4 scopes, 4 companies of 100
// Workers each) draining their backlogs at the same time, against one kit draining the same backlog
// alone, alternating, in one run. Each kit is one kit-runner process (a recovery pass, as
// `edgeworkers reconcile --lane recovery` runs it, no-op deploy task) at `reconcile.deploy_concurrency`
// CONCURRENCY. A kit's time runs from `go` until its own pass returns; every kit must complete
// exactly its own ROWS rows. Aim: per-kit rows/s together within 20 % of alone.
//
//   node --import tsx bench/scale/kits.ts [--rows 1000] [--rounds 3] [--concurrency 4]
//
// Prints Markdown for BENCHMARKS.md.
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {createInterface} from 'node:readline'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'
import {createDatabase, dropDatabase, postgresServer} from '../support/store-baseline.js'
import {log, machineLoad, median} from '../support/stats.js'
import {fillOutbox, seedWorkers} from './backlog.js'

const {values: options} = parseArgs({
  options: {rows: {type: 'string', default: '1000'}, rounds: {type: 'string', default: '3'}, concurrency: {type: 'string', default: '4'}},
})
const ROWS = Number(options.rows)
const ROUNDS = Number(options.rounds)
const CONCURRENCY = Number(options.concurrency)
const KITS = ['onprem:00000000000a', 'onprem:00000000000b', 'onprem:00000000000c', 'onprem:00000000000d']
const RUNNER = fileURLToPath(new URL('./kit-runner.ts', import.meta.url))
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-kits-'))

/** Runs one kit-runner per scope at once; each kit's rows/s over its own time. */
async function drain(url: string, scopes: string[], round: number): Promise<number[]> {
  for (const [k, scope] of scopes.entries())
    await fillOutbox({url, workDir, scope, company: `kit${KITS.indexOf(scope)}`, label: `${round}-${scopes.length}-${k}`, rows: ROWS})
  const children = scopes.map((scope) =>
    spawn(process.execPath, ['--import', 'tsx', RUNNER, url, workDir, scope, String(CONCURRENCY)], {stdio: ['pipe', 'pipe', 'inherit']}),
  )
  const lines = children.map((child) => createInterface({input: child.stdout})[Symbol.asyncIterator]())
  await Promise.all(lines.map((iterator) => iterator.next()))
  const started = performance.now()
  for (const child of children) child.stdin.end('go\n')
  const rates = await Promise.all(
    lines.map(async (iterator, k) => {
      const report = JSON.parse((await iterator.next()).value as string) as {completed: number; error: string | null}
      const seconds = (performance.now() - started) / 1000
      if (report.completed !== ROWS || report.error) throw new Error(`kit ${scopes[k]}: ${JSON.stringify(report)}, expected ${ROWS} completed`)
      return ROWS / seconds
    }),
  )
  await Promise.all(children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)))
  return rates
}

const postgres = await postgresServer()
const alone: number[] = []
const together: number[] = []
try {
  const url = await createDatabase(postgres.adminUrl, 'edgeworkers_bench_kits')
  const store = await openStore(settingsSchema.parse({data_dir: workDir, store: {url}}))
  await store.migrate()
  for (const k of KITS.keys()) await seedWorkers(store, `kit${k}`)
  await store.close()
  for (let round = 0; round < ROUNDS; round++) {
    const runs: Array<[string, () => Promise<void>]> = [
      ['alone', async () => void alone.push(...(await drain(url, [KITS[round % KITS.length]!], round)))],
      ['together', async () => void together.push(...(await drain(url, KITS, round)))],
    ]
    for (const [name, run] of round % 2 === 0 ? runs : runs.reverse()) {
      await run()
      log(
        `round ${round + 1}, ${name}: ${(name === 'alone' ? alone : together)
          .slice(name === 'alone' ? -1 : -KITS.length)
          .map((rate) => rate.toFixed(0))
          .join(' / ')} rows/s per kit (${machineLoad()})`,
      )
    }
  }
  await dropDatabase(postgres.adminUrl, 'edgeworkers_bench_kits')
} finally {
  await postgres.stop()
  rmSync(workDir, {recursive: true, force: true})
}
console.log(`\n${new Date().toISOString()}, ${machineLoad()}; ${ROWS} rows per kit, deploy_concurrency ${CONCURRENCY}, medians of ${ROUNDS} rounds\n`)
console.log('| kits at once | per-kit rows/s (median) | min | max | ÷ alone |')
console.log('|---|---|---|---|---|')
console.log(`| 1 (alone) | ${median(alone).toFixed(0)} | ${Math.min(...alone).toFixed(0)} | ${Math.max(...alone).toFixed(0)} | 1.00 |`)
console.log(
  `| ${KITS.length} | ${median(together).toFixed(0)} | ${Math.min(...together).toFixed(0)} | ${Math.max(...together).toFixed(0)} | **${(median(together) / median(alone)).toFixed(2)}** |`,
)
