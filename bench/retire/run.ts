// Retirement and orphan-report benchmark, on a SQLite store and a real edge host (startBenchHost), in one run:
//   (a) `retireDepartment` (what `edgeworkers retire <department>` runs) from its start until the
//       Worker's public URL answers 404, median over WORKERS Workers, each deployed (fixtures/workers/
//       hello, via deployWorker) and answering 200 before it is retired.
//   (b) `orphanReport` (what `edgeworkers orphan-report` runs) over 10,000 Worker rows and 10,000
//       listed scripts, alternated with the baseline — listing the host's scripts alone
//       (listHostScripts, same provider, same page size) — ROUNDS times each; medians and the ratio.
//       Seeding is not timed and runs no workerd: on a second host, 10,000 Worker rows (one company,
//       10,000 departments) are inserted through the store API, and the host's state (host.sqlite,
//       src/edge-host/state/host-state.ts) gets 10,000 script rows in one transaction of raw INSERTs, with no
//       shard and no release (so no workerd runs them): 9,000 named after the Worker rows, 1,000
//       unowned; half of each retired, half locked down.
//
//   node --import tsx bench/retire/run.ts [--workers 5] [--scripts 10000] [--rounds 5]
//
// Prints Markdown for BENCHMARKS.md.
import {appendFileSync, cpSync, mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import Database from 'better-sqlite3'
import {settingsSchema, type Settings} from '../../src/config/schema.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {listHostScripts} from '../../src/engine/retire/host-listing.js'
import {orphanReport, type OrphanReport} from '../../src/engine/retire/orphan-report.js'
import {retireDepartment} from '../../src/engine/retire/retire-department.js'
import {STATE_FILE} from '../../src/edge-host/state/host-state.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import {openStore, scriptNameFor, type Store} from '../../src/store/index.js'
import {startBenchHost, type BenchHost} from '../support/host.js'
import {FIXTURES_DIR} from '../support/fixtures.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({
  options: {workers: {type: 'string', default: '5'}, scripts: {type: 'string', default: '10000'}, rounds: {type: 'string', default: '5'}},
})
const WORKERS = Number(options.workers)
const SCRIPTS = Number(options.scripts)
const ROUNDS = Number(options.rounds)
const UNOWNED_SHARE = 0.1
const COMPANY = 'bench'
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-retire-'))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A migrated SQLite store in its own data dir, paired with `host`, and an engine over it. */
async function pairedEngine(host: BenchHost, name: string): Promise<{store: Store; engine: Engine; settings: Settings}> {
  const settings = settingsSchema.parse({data_dir: path.join(workDir, name), store: {url: ''}})
  const store = await openStore(settings)
  await store.migrate()
  await store.kit.savePairing(await pairWithHost(host.adminUrl, host.pairingCode!, 10_000))
  await store.tenants.createCompany({id: COMPANY, name: 'Bench'})
  return {store, settings, engine: await createEngine(store, settings, onPremHosts)}
}

async function status(url: string): Promise<number> {
  const response = await fetch(url)
  await response.arrayBuffer()
  return response.status
}

/** (a) Deploy WORKERS Workers; then, one at a time, retire each and time it until its URL answers 404. */
async function benchRetire(): Promise<number[]> {
  const host = await startBenchHost()
  const {store, engine} = await pairedEngine(host, 'retire')
  try {
    const projectDir = path.join(workDir, 'hello')
    cpSync(path.join(FIXTURES_DIR, 'hello'), projectDir, {recursive: true})
    appendFileSync(path.join(projectDir, 'index.js'), '// bench retire\n')
    const deployed: Array<{departmentId: string; url: string}> = []
    for (let index = 0; index < WORKERS; index++) {
      const departmentId = `dept-retire-${index}`
      await store.tenants.createDepartment({id: departmentId, company_id: COMPANY, name: departmentId})
      const outcome = await deployWorker(engine, {projectDir, departmentId, wait: true})
      if (outcome.state !== 'completed') throw new Error(`deploy ${departmentId}: ${outcome.state} ${outcome.message}`)
      const url = `${host.publicUrl}/${outcome.scriptName}/`
      if ((await status(url)) !== 200) throw new Error(`${url} does not serve before the retirement`)
      deployed.push({departmentId, url})
    }
    const times: number[] = []
    for (const {departmentId, url} of deployed) {
      const started = performance.now()
      const outcome = await retireDepartment(engine, {departmentId, companyId: COMPANY})
      if (outcome.state !== 'retired') throw new Error(`retire ${departmentId}: ${outcome.state} ${outcome.code} ${outcome.message}`)
      while ((await status(url)) !== 404) {
        if (performance.now() - started > 120_000) throw new Error(`${url} still answers after 2 minutes`)
        await sleep(5)
      }
      times.push(performance.now() - started)
      log(`(a) ${departmentId}: ${times.at(-1)!.toFixed(0)} ms (steps ${outcome.steps.join(', ')})`)
    }
    return times
  } finally {
    await store.close()
    await host.stop()
  }
}

/** (b) Seeds 10,000 Worker rows and 10,000 host script rows, then alternates the report and the bare listing. */
async function benchOrphanReport(): Promise<{report: OrphanReport; reportMs: number[]; listMs: number[]; listed: number}> {
  const host = await startBenchHost()
  const {store, engine, settings} = await pairedEngine(host, 'orphans')
  try {
    const owned = Math.round(SCRIPTS * (1 - UNOWNED_SHARE))
    const names: string[] = []
    for (let start = 0; start < SCRIPTS; start += 1_000) {
      await store.transaction(async (tx) => {
        for (let index = start; index < Math.min(SCRIPTS, start + 1_000); index++) {
          const departmentId = `dept-${index}`
          await tx.tenants.createDepartment({id: departmentId, company_id: COMPANY, name: departmentId})
          const worker = await tx.workers.create({
            company_id: COMPANY,
            department_id: departmentId,
            script_name: scriptNameFor(COMPANY, departmentId),
            status: 'deployed',
          })
          if (index < owned) names.push(worker.script_name)
        }
      })
    }
    for (let index = owned; index < SCRIPTS; index++) names.push(scriptNameFor('gone', `dept-${index}`))
    const db = new Database(path.join(host.dataDir, STATE_FILE), {timeout: 10_000})
    try {
      const insert = db.prepare(`INSERT INTO scripts (name, locked_down_at, retired_at, created_at, updated_at, policy_updated_at) VALUES (?, ?, ?, ?, ?, ?)`)
      const now = Date.now()
      db.transaction(() => {
        for (const [index, name] of names.entries()) insert.run(name, now, index % 2 === 0 ? now : null, now, now, now)
      })()
    } finally {
      db.close()
    }
    log(`(b) seeded ${SCRIPTS} Worker rows and ${names.length} host script rows`)

    const resolution = await engine.resolveProvider()
    if (resolution.status !== 'ready') throw new Error(resolution.message)
    const list = () => listHostScripts(resolution.provider, settings.host_reconcile.listing_max_pages)
    // Warm-up of both, not counted.
    let report = await orphanReport(engine)
    let listed = (await list()).length
    const reportMs: number[] = []
    const listMs: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      let started = performance.now()
      listed = (await list()).length
      listMs.push(performance.now() - started)
      started = performance.now()
      report = await orphanReport(engine)
      reportMs.push(performance.now() - started)
      log(`(b) round ${round + 1}: list ${listMs.at(-1)!.toFixed(0)} ms, orphan-report ${reportMs.at(-1)!.toFixed(0)} ms`)
    }
    return {report, reportMs, listMs, listed}
  } finally {
    await store.close()
    await host.stop()
  }
}

async function main(): Promise<void> {
  log(`# ${machineLoad()}`)
  const retire = await benchRetire()
  const orphans = await benchOrphanReport()
  const reportMedian = median(orphans.reportMs)
  const listMedian = median(orphans.listMs)
  console.log(`\n${new Date().toISOString()} — ${machineLoad()}\n`)
  console.log(`(a) retire → public URL answers 404, ${retire.length} Workers:\n`)
  console.log('| median ms | min ms | max ms |')
  console.log('|---|---|---|')
  console.log(`| ${median(retire).toFixed(0)} | ${Math.min(...retire).toFixed(0)} | ${Math.max(...retire).toFixed(0)} |`)
  console.log(`\n(b) ${SCRIPTS} Worker rows, ${orphans.listed} listed scripts, ${ROUNDS} rounds alternating:\n`)
  console.log('| measure | median ms | min ms | max ms |')
  console.log('|---|---|---|---|')
  console.log(
    `| list the host's scripts (baseline) | ${listMedian.toFixed(0)} | ${Math.min(...orphans.listMs).toFixed(0)} | ${Math.max(...orphans.listMs).toFixed(0)} |`,
  )
  console.log(`| \`orphanReport\` | ${reportMedian.toFixed(0)} | ${Math.min(...orphans.reportMs).toFixed(0)} | ${Math.max(...orphans.reportMs).toFixed(0)} |`)
  console.log(`\nratio of medians orphan-report / listing: **${(reportMedian / listMedian).toFixed(2)}**\n`)
  console.log(`report: \`${JSON.stringify(orphans.report)}\``)
}

try {
  await main()
} finally {
  rmSync(workDir, {recursive: true, force: true})
}
