// Real passes at scale on PostgreSQL: a backlog of WORKERS Workers × VERSIONS versions (5,000 due
// deploy rows at the defaults), every row a real version with real artifacts, queued through the
// engine's enqueue (queueSharedBacklog: each release built once, then a version and a deploy row of it
// for every Worker, as `deploy --no-wait` leaves them), drained against a real edge host
// (in-process, SHARDS workerd shards) by 1 and by PASSES `edgeworkers reconcile --lane recovery
// --watch --interval 1` processes of the built CLI started at once, on an embedded PostgreSQL 17
// (fsync on). Each run gets a fresh host and a fresh database; the two alternate, the order flipping
// every round. *wall*: from spawning the processes until no deploy row is pending or leased.
// Then: every Worker serves its newest version, every row is terminal with exactly one deploy audit
// row (`deployed` or `deploy_superseded`), no release was uploaded twice. Aim: PASSES processes
// ≤ 0.5× the wall time of one.
//
//   npm run build && node --import tsx bench/scale/passes.ts [--workers 100] [--versions 50] [--passes 16] [--rounds 1] [--shards 4]
//
// Prints Markdown for BENCHMARKS.md.
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import {openStore} from '../../src/store/index.js'
import {startBenchHost} from '../support/host.js'
import {expectEachRowSettledOnce, expectNewestServed, HostCounter, queueSharedBacklog} from '../support/deploy-backlog.js'
import {createDatabase, dropDatabase, postgresServer} from '../support/store-baseline.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({
  options: {
    workers: {type: 'string', default: '100'},
    versions: {type: 'string', default: '50'},
    passes: {type: 'string', default: '16'},
    rounds: {type: 'string', default: '1'},
    shards: {type: 'string', default: '4'},
  },
})
const WORKERS = Number(options.workers)
const VERSIONS = Number(options.versions)
const PASSES = Number(options.passes)
const ROUNDS = Number(options.rounds)
const SHARDS = Number(options.shards)
const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../bin/run.js')
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-passes-'))

interface Figure {
  passes: number
  queueSeconds: number
  wallSeconds: number
  /** When the last superseded row settled, and the first completed one (an upload), after the start. */
  lastYieldSeconds: number
  firstCompletedSeconds: number
  completed: number
  superseded: number
  uploads: number
  swaps: number
  load: string
}

function messageOf(line: string): string {
  try {
    return String((JSON.parse(line) as {msg?: unknown}).msg)
  } catch {
    return line.trim()
  }
}

async function run(adminUrl: string, passes: number, round: number): Promise<Figure> {
  const label = `passes_${round}_${passes}`
  const dataDir = path.join(workDir, label)
  const projectsDir = path.join(workDir, `${label}-projects`)
  mkdirSync(projectsDir, {recursive: true})
  const counter = new HostCounter()
  const host = await startBenchHost({settings: {shards: SHARDS}, onLog: counter.record})
  const url = await createDatabase(adminUrl, label)
  const store = await openStore(settingsSchema.parse({data_dir: dataDir, store: {url}}))
  const children: ChildProcess[] = []
  try {
    await store.migrate()
    await store.kit.savePairing(await pairWithHost(host.adminUrl, host.pairingCode!, 10_000))
    const queued = performance.now()
    const newest = await queueSharedBacklog(store, {dataDir, projectsDir, url, label, workers: WORKERS, versions: VERSIONS, parallel: 8})
    const queueSeconds = (performance.now() - queued) / 1000
    log(`${label}: ${WORKERS * VERSIONS} rows queued in ${queueSeconds.toFixed(0)} s (${machineLoad()})`)
    const problems = new Map<string, number>()
    const swapsBefore = counter.swaps
    const started = performance.now()
    const startedAt = Date.now()
    for (let i = 0; i < passes; i++) {
      const child = spawn(process.execPath, [CLI, 'reconcile', '--lane', 'recovery', '--watch', '--interval', '1'], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: {...process.env, EDGEWORKERS_CONFIG: undefined, EDGEWORKERS_DATA_DIR: dataDir, EDGEWORKERS_STORE__URL: url, EDGEWORKERS_LOG_LEVEL: 'warn'},
      })
      child.stderr!.on('data', (chunk: Buffer) => {
        // Log lines are JSON; their message says what failed (the stack adds nothing here).
        for (const message of chunk
          .toString()
          .split('\n')
          .filter((line) => /deadlock|failed:|error/i.test(line))
          .map(messageOf))
          problems.set(message, (problems.get(message) ?? 0) + 1)
      })
      children.push(child)
    }
    const open = async () =>
      (await store.outbox.list({operation: 'deploy', status: 'pending', limit: 1})).length +
        (await store.outbox.list({operation: 'deploy', status: 'leased', limit: 1})).length >
      0
    while (await open()) await new Promise((resolve) => setTimeout(resolve, 250))
    const wallSeconds = (performance.now() - started) / 1000
    const load = machineLoad()
    await expectNewestServed(store, host.publicUrl, newest)
    await expectEachRowSettledOnce(store, counter.perRelease)
    const rows = await store.outbox.list({operation: 'deploy', limit: 1_000_000})
    if (rows.length !== WORKERS * VERSIONS) throw new Error(`${rows.length} deploy rows, expected ${WORKERS * VERSIONS}`)
    for (const [problem, count] of problems) log(`${label}: ${count} × ${problem}`)
    const secondsAfterStart = (status: string) => rows.filter((row) => row.status === status).map((row) => (row.updated_at - startedAt) / 1000)
    const figure = {
      passes,
      lastYieldSeconds: Math.max(...secondsAfterStart('cancelled')),
      firstCompletedSeconds: Math.min(...secondsAfterStart('completed')),
      queueSeconds,
      wallSeconds,
      completed: rows.filter((row) => row.status === 'completed').length,
      superseded: rows.filter((row) => row.status === 'cancelled').length,
      uploads: counter.uploads,
      swaps: counter.swaps - swapsBefore,
      load,
    }
    log(`${label}: drained in ${wallSeconds.toFixed(1)} s, ${figure.uploads} uploads, ${figure.swaps} shard swaps (${load})`)
    return figure
  } finally {
    for (const child of children) child.kill('SIGTERM')
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)))))
    await store.close()
    await host.stop()
    await dropDatabase(adminUrl, label)
    rmSync(dataDir, {recursive: true, force: true})
    rmSync(projectsDir, {recursive: true, force: true})
  }
}

// 16 processes × a pool of up to 10 connections each, and the bench's own.
const postgres = await postgresServer({flags: ['max_connections=300']})
const figures: Figure[] = []
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? [1, PASSES] : [PASSES, 1]
    for (const passes of order) figures.push(await run(postgres.adminUrl, passes, round))
  }
} finally {
  await postgres.stop()
  rmSync(workDir, {recursive: true, force: true})
}
const wallOf = (passes: number) => median(figures.filter((figure) => figure.passes === passes).map((figure) => figure.wallSeconds))
console.log(
  `\n${new Date().toISOString()}, ${machineLoad()}; ${WORKERS} Workers × ${VERSIONS} versions = ${WORKERS * VERSIONS} rows, ${SHARDS} shards, ${ROUNDS} round(s)\n`,
)
console.log('| passes | queued s | wall s | last yield s | first completed s | completed | superseded | uploads | shard swaps | load at the end |')
console.log('|---|---|---|---|---|---|---|---|---|---|')
for (const figure of figures) {
  const row = [
    figure.passes,
    figure.queueSeconds.toFixed(0),
    figure.wallSeconds.toFixed(1),
    figure.lastYieldSeconds.toFixed(1),
    figure.firstCompletedSeconds.toFixed(1),
    figure.completed,
    figure.superseded,
    figure.uploads,
    figure.swaps,
    figure.load,
  ]
  console.log(`| ${row.join(' | ')} |`)
}
console.log(`\n${PASSES} passes ÷ 1 pass (median wall): **${(wallOf(PASSES) / wallOf(1)).toFixed(2)}×**`)
