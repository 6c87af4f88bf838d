// `edgeworkers status` per refresh: takeSnapshot (every query one refresh of the live view or one
// `status --json` runs) over a store of 1,000,000 outbox rows and 10,000 Workers (./dataset.ts), on
// SQLite and PostgreSQL, alternated ROUNDS times with the baseline — a plain `SELECT count(*) FROM
// edge_worker_outbox` over its own connection to the same database — in the same run. The store is
// paired with a host address that refuses connections, so the host part of each refresh fails at
// once (connect refused) and what is timed is the store; seeding is not timed.
//
//   node --import tsx bench/status/run.ts [--rows 1000000] [--workers 10000] [--rounds 20]
//
// PostgreSQL: EDGEWORKERS_BENCH_PG_URL (an admin URL; a scratch database is created and dropped),
// else an embedded server is started. Prints Markdown for BENCHMARKS.md.
import {mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import Database from 'better-sqlite3'
import pg from 'pg'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {takeSnapshot, type StatusSnapshot} from '../../src/engine/status/snapshot.js'
import {openStore, type Backend} from '../../src/store/index.js'
import {createDatabase, dropDatabase, freePort, postgresServer} from '../support/store-baseline.js'
import {fillDataset, SCOPE} from './dataset.js'
import {log, machineLoad, percentile} from '../support/stats.js'

const {values: options} = parseArgs({
  options: {rows: {type: 'string', default: '1000000'}, workers: {type: 'string', default: '10000'}, rounds: {type: 'string', default: '20'}},
})
const SIZE = {outboxRows: Number(options.rows), workers: Number(options.workers), auditRows: 100_000}
const ROUNDS = Number(options.rounds)
const WARMUP = 3
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-status-'))

interface Result {
  backend: Backend
  snapshotMs: number[]
  baselineMs: number[]
  snapshot: StatusSnapshot
}

async function bench(backend: Backend, url: string): Promise<Result> {
  const settings = settingsSchema.parse({data_dir: workDir, store: {url}})
  const setup = await openStore(settings)
  await setup.migrate()
  await setup.close()
  const seeding = performance.now()
  await fillDataset(backend, url, SIZE, Date.now())
  log(`${backend}: seeded ${SIZE.outboxRows} outbox rows, ${SIZE.workers} Workers in ${((performance.now() - seeding) / 1000).toFixed(0)} s`)

  const store = await openStore(settings)
  // A pairing whose host refuses connections: the scope is known, the host part costs one refused connect.
  await store.kit.savePairing({
    scope: SCOPE,
    host_url: `http://127.0.0.1:${await freePort()}`,
    host_fingerprint: 'f'.repeat(64),
    host_public_key: 'unused',
    shared_secret: 'a'.repeat(64),
  })
  const engine = await createEngine(store, settings, onPremHosts)
  const baseline = await baselineCounter(backend, url)
  const snapshotMs: number[] = []
  const baselineMs: number[] = []
  let snapshot: StatusSnapshot | undefined
  try {
    for (let round = 0; round < WARMUP + ROUNDS; round++) {
      let started = performance.now()
      await baseline.count()
      const baselineTook = performance.now() - started
      started = performance.now()
      snapshot = await takeSnapshot(engine)
      const snapshotTook = performance.now() - started
      if (round >= WARMUP) {
        baselineMs.push(baselineTook)
        snapshotMs.push(snapshotTook)
      }
    }
  } finally {
    await baseline.close()
    await store.close()
  }
  log(`${backend}: refresh median ${percentile(snapshotMs, 50).toFixed(1)} ms, baseline median ${percentile(baselineMs, 50).toFixed(1)} ms (${machineLoad()})`)
  return {backend, snapshotMs, baselineMs, snapshot: snapshot!}
}

async function baselineCounter(backend: Backend, url: string): Promise<{count: () => Promise<number>; close: () => Promise<void>}> {
  if (backend === 'sqlite') {
    const db = new Database(url, {readonly: true})
    const statement = db.prepare('select count(*) as n from edge_worker_outbox')
    return {count: async () => (statement.get() as {n: number}).n, close: async () => void db.close()}
  }
  const client = new pg.Client({connectionString: url})
  await client.connect()
  return {
    count: async () => Number((await client.query<{n: string}>('select count(*) as n from edge_worker_outbox')).rows[0]!.n),
    close: () => client.end(),
  }
}

async function main(): Promise<void> {
  const results: Result[] = []
  results.push(await bench('sqlite', path.join(workDir, 'status.sqlite')))
  const postgres = await postgresServer()
  try {
    const url = await createDatabase(postgres.adminUrl, 'edgeworkers_bench_status')
    results.push(await bench('postgres', url))
    await dropDatabase(postgres.adminUrl, 'edgeworkers_bench_status')
  } finally {
    await postgres.stop()
    rmSync(workDir, {recursive: true, force: true})
  }
  const first = results[0]!.snapshot
  console.log(
    `\n${SIZE.outboxRows} outbox rows, ${SIZE.workers} Workers, ${SIZE.auditRows} audit rows; ${ROUNDS} rounds after ${WARMUP} warm-up; ${new Date().toISOString()}; ${machineLoad()}\n`,
  )
  console.log('| backend | refresh median | refresh p95 | baseline `count(*)` median | baseline p95 | ratio (medians) |')
  console.log('|---|---|---|---|---|---|')
  for (const r of results) {
    const [refresh, base] = [percentile(r.snapshotMs, 50), percentile(r.baselineMs, 50)]
    console.log(
      `| ${r.backend} | ${refresh.toFixed(1)} ms | ${percentile(r.snapshotMs, 95).toFixed(1)} ms | ${base.toFixed(1)} ms | ${percentile(r.baselineMs, 95).toFixed(1)} ms | ${(refresh / base).toFixed(2)} |`,
    )
  }
  const lanes = first.lanes.map((lane) => `${lane.operation} ${lane.pending}p/${lane.leased}l/${lane.failed}f/${lane.uncertain}u`).join(', ')
  console.log(
    `\nWhat one refresh saw (SQLite): ${lanes}; ${first.errorGroups.length} error groups; ${first.leased.length} leased rows listed; ${first.retirements.pending} pending retirements; ${first.orphans?.pending} pending orphans.`,
  )
}

await main()
