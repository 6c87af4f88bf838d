// Outbox throughput: claim+settle over ROWS rows with 1 and 4 runner processes, on SQLite and
// PostgreSQL, against the raw rate of single-row durable UPDATE commits on the same database.
// Runners claim BATCH rows at a time and settle either one commit per row or one per claimed batch.
//
//   node --import tsx bench/outbox/run.ts [--rows 20000] [--batch 50]
//
// PostgreSQL: EDGEWORKERS_BENCH_PG_URL (an admin URL; a scratch database is created and dropped),
// else an embedded server is started (fsync on). SQLite: a file in a temp dir, default settings
// (WAL, synchronous=FULL). Prints a Markdown table for BENCHMARKS.md.
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {createInterface} from 'node:readline'
import type {Readable} from 'node:stream'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore, type Backend} from '../../src/store/index.js'
import {createDatabase, dropDatabase, postgresBaseline, postgresServer, sqliteBaseline} from '../support/store-baseline.js'

const {values: options} = parseArgs({options: {rows: {type: 'string', default: '20000'}, batch: {type: 'string', default: '50'}}})
const ROWS = Number(options.rows)
const BATCH = Number(options.batch)
const RUNNER_COUNTS = [1, 4]
const COMMIT_MODES = ['row', 'batch'] as const
type CommitPer = (typeof COMMIT_MODES)[number]
const SCOPE = 'onprem:0123456789ab'
const RUNNER = fileURLToPath(new URL('./runner.ts', import.meta.url))
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-'))

interface Result {
  backend: Backend
  runners: number
  commitPer: CommitPer
  seconds: number
  rowsPerSecond: number
  baselineCommitsPerSecond: number
}

async function main(): Promise<void> {
  const results: Result[] = []
  results.push(...(await benchBackend('sqlite', path.join(workDir, 'bench.sqlite'))))
  const postgres = await postgresServer()
  try {
    const url = await createDatabase(postgres.adminUrl, 'edgeworkers_bench')
    results.push(...(await benchBackend('postgres', url)))
    await dropDatabase(postgres.adminUrl, 'edgeworkers_bench')
  } finally {
    await postgres.stop()
    rmSync(workDir, {recursive: true, force: true})
  }
  console.log(`\n${ROWS} rows, claim batch ${BATCH}; ${new Date().toISOString()}\n`)
  console.log('| backend | runners | settle commits | seconds | claim+settle rows/s | baseline single-row commits/s | ratio |')
  console.log('|---|---|---|---|---|---|---|')
  for (const r of results) {
    const ratio = r.rowsPerSecond / r.baselineCommitsPerSecond
    const commits = r.commitPer === 'row' ? 'one per row' : 'one per batch'
    console.log(
      `| ${r.backend} | ${r.runners} | ${commits} | ${r.seconds.toFixed(1)} | ${r.rowsPerSecond.toFixed(0)} | ${r.baselineCommitsPerSecond.toFixed(0)} | ${ratio.toFixed(2)} |`,
    )
  }
}

async function benchBackend(backend: Backend, url: string): Promise<Result[]> {
  const settings = settingsSchema.parse({data_dir: workDir, store: {url}})
  const store = await openStore(settings)
  await store.migrate()
  await store.close()
  const results: Result[] = []
  for (const commitPer of COMMIT_MODES) {
    for (const runners of RUNNER_COUNTS) {
      await fillOutbox(url, `${commitPer}-${runners}`)
      // Measured right before and right after each run (mean), so both figures see the same machine conditions.
      const baseline = async () => (backend === 'sqlite' ? sqliteBaseline(url) : await postgresBaseline(url))
      const before = await baseline()
      const seconds = await drain(url, runners, commitPer)
      const baselineCommitsPerSecond = (before + (await baseline())) / 2
      results.push({backend, runners, commitPer, seconds, rowsPerSecond: ROWS / seconds, baselineCommitsPerSecond})
      log(
        `${backend}: ${runners} runner(s), a commit per ${commitPer}: ${ROWS} rows in ${seconds.toFixed(1)} s; baseline ${baselineCommitsPerSecond.toFixed(0)} commits/s`,
      )
    }
  }
  return results
}

/** ROWS due deploy rows, inserted in transactions of 1,000 (setup, not measured). */
async function fillOutbox(url: string, round: string): Promise<void> {
  const store = await openStore(settingsSchema.parse({data_dir: workDir, store: {url}}))
  try {
    for (let start = 0; start < ROWS; start += 1_000) {
      await store.transaction(async (tx) => {
        for (let i = start; i < Math.min(ROWS, start + 1_000); i++) {
          await tx.outbox.enqueue({operation: 'deploy', dedupe_key: `bench:${round}:${i}`, dispatch_namespace: SCOPE, payload: {i}})
        }
      })
    }
  } finally {
    await store.close()
  }
}

/** Starts the runners, waits until each has opened the store, then times them from `go` to the last one done. */
async function drain(url: string, runners: number, commitPer: CommitPer): Promise<number> {
  const children = Array.from({length: runners}, (_, i) =>
    spawn(process.execPath, ['--import', 'tsx', RUNNER, url, workDir, SCOPE, `bench-${i}`, String(BATCH), commitPer], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  )
  const outputs = children.map((child) => readLines(child.stdout))
  await Promise.all(outputs.map((lines) => lines.next()))
  const started = performance.now()
  for (const child of children) child.stdin.write('go\n')
  const reports = await Promise.all(outputs.map(async (lines) => JSON.parse((await lines.next()).value as string) as {settled: number}))
  const seconds = (performance.now() - started) / 1000
  await Promise.all(children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)))
  const settled = reports.reduce((sum, report) => sum + report.settled, 0)
  if (settled !== ROWS) throw new Error(`runners settled ${settled} rows, expected ${ROWS}`)
  return seconds
}

function readLines(stream: Readable): AsyncIterator<string> {
  return createInterface({input: stream})[Symbol.asyncIterator]()
}

function log(line: string): void {
  process.stderr.write(`${line}\n`)
}

await main()
