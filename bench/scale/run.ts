// Scale-out on PostgreSQL: the kit's claim+settle path against graphile-worker, same database, same
// run. One embedded PostgreSQL (fsync on; or EDGEWORKERS_BENCH_PG_URL), one scratch database holding
// both the kit's schema and graphile-worker's. Each round runs, alternating which goes first:
// - graphile-worker: ROWS no-op jobs (added in bulk beforehand, not timed) drained at concurrency
//   1, 4 and 16 in one process, and by 4 processes × 4; timed from `go` until its jobs table is empty;
// - the kit: ROWS due deploy rows over 100 Workers (round-robin, as a backlog of many departments),
//   drained by recovery passes (`recovery.batch_size` 50, as the lane claims) with a no-op deploy
//   task (under the claim's lease: settle) at `reconcile.deploy_concurrency` 1, 4 and 16 in
//   one process, and by 4 processes × 4; timed from `go` until the last pass returns;
// and the raw single-row commit baseline right before and after it. Prints medians over the rounds:
// rows/s, ratio to graphile-worker at equal concurrency, ratio to the raw baseline, and the CPU
// time per row of each system's runner processes and of the PostgreSQL server (embedded server only).
//
//   node --import tsx bench/scale/run.ts [--rows 2000] [--rounds 3] [--shapes 1,4,16,4×4]
//
// Prints Markdown for BENCHMARKS.md.
import {spawn, type ChildProcessByStdio} from 'node:child_process'
import {once} from 'node:events'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {createInterface} from 'node:readline'
import type {Readable, Writable} from 'node:stream'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {makeWorkerUtils} from 'graphile-worker'
import pg from 'pg'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'
import {createDatabase, dropDatabase, postgresBaseline, postgresServer, postmasterPid, processTreeCpuMicros} from '../support/store-baseline.js'
import {log, machineLoad, median} from '../support/stats.js'
import {fillOutbox, seedWorkers} from './backlog.js'

const {values: options} = parseArgs({
  options: {rows: {type: 'string', default: '2000'}, rounds: {type: 'string', default: '3'}, shapes: {type: 'string', default: '1,4,16,4×4'}},
})
const ROWS = Number(options.rows)
const ROUNDS = Number(options.rounds)
const SCOPE = 'onprem:0123456789ab'
/** Label → [processes, concurrency per process]; `--shapes` picks some (comma-separated labels). */
const ALL_SHAPES: Record<string, [number, number]> = {'1': [1, 1], '4': [1, 4], '16': [1, 16], '4×4': [4, 4]}
const SHAPES = Object.fromEntries(
  options.shapes.split(',').map((label) => {
    const shape = ALL_SHAPES[label.trim()]
    if (!shape) throw new Error(`--shapes: unknown shape ${JSON.stringify(label)} (known: ${Object.keys(ALL_SHAPES).join(', ')})`)
    return [label.trim(), shape]
  }),
)
const here = path.dirname(fileURLToPath(import.meta.url))
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-scale-'))

type System = 'graphile-worker' | 'kit'
interface Sample {
  system: System
  shape: string
  rowsPerSecond: number
  baseline: number
  /** CPU µs per row of the runner processes, and of the PostgreSQL server (NaN for an external server). */
  clientCpu: number
  serverCpu: number
}
/** What one drain took: wall seconds, and the runners' CPU µs in all. */
interface Drain {
  seconds: number
  cpuMicros: number
  serverMicros: number
}

async function main(): Promise<void> {
  const postgres = await postgresServer()
  const samples: Sample[] = []
  try {
    const url = await createDatabase(postgres.adminUrl, 'edgeworkers_bench_scale')
    const serverPid = process.env.EDGEWORKERS_BENCH_PG_URL ? undefined : await postmasterPid(postgres.adminUrl)
    const serverCpu = () => (serverPid === undefined ? Number.NaN : processTreeCpuMicros(serverPid))
    const store = await openStore(settingsSchema.parse({data_dir: workDir, store: {url}}))
    await store.migrate()
    await seedWorkers(store, 'bench')
    await store.close()
    const utils = await makeWorkerUtils({connectionString: url})
    await utils.migrate()
    try {
      for (let round = 0; round < ROUNDS; round++) {
        for (const shape of Object.keys(SHAPES)) {
          const order: System[] = round % 2 === 0 ? ['graphile-worker', 'kit'] : ['kit', 'graphile-worker']
          for (const system of order) {
            const before = await postgresBaseline(url)
            const drain = system === 'kit' ? await drainKit(url, shape, round, serverCpu) : await drainGraphile(url, utils, shape, serverCpu)
            const baseline = (before + (await postgresBaseline(url))) / 2
            samples.push({
              system,
              shape,
              rowsPerSecond: ROWS / drain.seconds,
              baseline,
              clientCpu: drain.cpuMicros / ROWS,
              serverCpu: drain.serverMicros / ROWS,
            })
            log(
              `round ${round + 1}, ${system} ${shape}: ${(ROWS / drain.seconds).toFixed(0)} rows/s, baseline ${baseline.toFixed(0)} commits/s (${machineLoad()})`,
            )
          }
        }
      }
    } finally {
      await utils.release()
    }
    await dropDatabase(postgres.adminUrl, 'edgeworkers_bench_scale')
  } finally {
    await postgres.stop()
    rmSync(workDir, {recursive: true, force: true})
  }
  report(samples)
}

function report(samples: Sample[]): void {
  const of = (system: System, shape: string) => samples.filter((s) => s.system === system && s.shape === shape)
  console.log(`\n${new Date().toISOString()}, ${machineLoad()}; ${ROWS} rows per run, medians of ${ROUNDS} rounds\n`)
  console.log(
    '| concurrency | graphile-worker rows/s | kit rows/s | kit ÷ graphile-worker | baseline commits/s | graphile ÷ baseline | kit ÷ baseline | CPU µs per row, graphile-worker: runners + server | kit: runners + server |',
  )
  console.log('|---|---|---|---|---|---|---|---|---|')
  for (const shape of Object.keys(SHAPES)) {
    const graphile = median(of('graphile-worker', shape).map((s) => s.rowsPerSecond))
    const kit = median(of('kit', shape).map((s) => s.rowsPerSecond))
    const baseline = median([...of('graphile-worker', shape), ...of('kit', shape)].map((s) => s.baseline))
    const label = shape === '4×4' ? '4 processes × 4' : `${shape} (one process)`
    const cpu = (system: System) => {
      const runs = of(system, shape)
      return `${median(runs.map((s) => s.clientCpu)).toFixed(0)} + ${median(runs.map((s) => s.serverCpu)).toFixed(0)}`
    }
    console.log(
      `| ${label} | ${graphile.toFixed(0)} | ${kit.toFixed(0)} | **${(kit / graphile).toFixed(2)}×** | ${baseline.toFixed(0)} | ${(graphile / baseline).toFixed(2)} | ${(kit / baseline).toFixed(2)} | ${cpu('graphile-worker')} | ${cpu('kit')} |`,
    )
  }
}

async function drainKit(url: string, shape: string, round: number, serverCpu: () => number): Promise<Drain> {
  await fillOutbox({url, workDir, scope: SCOPE, company: 'bench', label: `${shape}-${round}`, rows: ROWS})
  const [processes, concurrency] = SHAPES[shape]!
  const children = startChildren(processes, () => [path.join(here, 'kit-runner.ts'), url, workDir, SCOPE, String(concurrency)])
  const lines = children.map((child) => createInterface({input: child.stdout})[Symbol.asyncIterator]())
  await Promise.all(lines.map((iterator) => iterator.next()))
  const serverBefore = serverCpu()
  const started = performance.now()
  for (const child of children) child.stdin.write('go\n')
  const reports = await Promise.all(
    lines.map(async (iterator) => JSON.parse((await iterator.next()).value as string) as {completed: number; error: string | null; cpuMicros: number}),
  )
  const seconds = (performance.now() - started) / 1000
  await Promise.all(children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)))
  // The runners' connections have closed: their backends' CPU is in the server's reaped time now.
  const serverMicros = serverCpu() - serverBefore
  const completed = reports.reduce((sum, report) => sum + report.completed, 0)
  if (completed !== ROWS || reports.some((report) => report.error))
    throw new Error(`kit ${shape}: ${completed} of ${ROWS} rows completed ${JSON.stringify(reports)}`)
  return {seconds, cpuMicros: reports.reduce((sum, report) => sum + report.cpuMicros, 0), serverMicros}
}

async function drainGraphile(url: string, utils: Awaited<ReturnType<typeof makeWorkerUtils>>, shape: string, serverCpu: () => number): Promise<Drain> {
  for (let start = 0; start < ROWS; start += 1_000) {
    await utils.addJobs(Array.from({length: Math.min(1_000, ROWS - start)}, (_, i) => ({identifier: 'noop', payload: {i: start + i}})))
  }
  const [processes, concurrency] = SHAPES[shape]!
  const children = startChildren(processes, () => [path.join(here, 'graphile-runner.ts'), url, String(concurrency)])
  const lines = children.map((child) => createInterface({input: child.stdout})[Symbol.asyncIterator]())
  await Promise.all(lines.map((iterator) => iterator.next()))
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    const serverBefore = serverCpu()
    const started = performance.now()
    for (const child of children) child.stdin.write('go\n')
    const left = async () => Number((await client.query<{count: string}>('select count(*) from graphile_worker._private_jobs')).rows[0]!.count)
    while ((await left()) > 0) await new Promise((resolve) => setTimeout(resolve, 20))
    const seconds = (performance.now() - started) / 1000
    for (const child of children) child.stdin.end('stop\n')
    const reports = await Promise.all(
      lines.map(async (iterator) => JSON.parse((await iterator.next()).value as string) as {completed: number; cpuMicros: number}),
    )
    const completed = reports.reduce((sum, report) => sum + report.completed, 0)
    if (completed !== ROWS) throw new Error(`graphile-worker ${shape}: ${completed} of ${ROWS} jobs completed`)
    await Promise.all(children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)))
    const serverMicros = serverCpu() - serverBefore
    return {seconds, cpuMicros: reports.reduce((sum, report) => sum + report.cpuMicros, 0), serverMicros}
  } finally {
    await client.end()
  }
}

function startChildren(count: number, args: () => string[]): ChildProcessByStdio<Writable, Readable, null>[] {
  return Array.from({length: count}, () => spawn(process.execPath, ['--import', 'tsx', ...args()], {stdio: ['pipe', 'pipe', 'inherit']}))
}

await main()
