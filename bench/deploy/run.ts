// Deploy benchmark, on a SQLite store and a real edge host (startBenchHost: in-process, 2 workerd
// shards, 20 ms coalesce window), all in one run:
//   (a) `deployWorker` (what `edgeworkers deploy` runs, waiting) from its start until the new version
//       serves — the readiness gate passed and a GET through the data plane answers the new body —
//       median over RUNS redeploys alternating fixtures hello / hello-v2 on one department, split by
//       stage (onStage timestamps). Baseline, alternated with it in the same run: the bare shard
//       restart — the same fixture uploaded straight through the signed management API, polled live
//       (HostClient.deploy), then the same GET.
//   (b) 100 Workers (100 departments) deployed one after another (`wait: true` each) against 100 other
//       Workers deployed in one go: 100 `wait: false` enqueues (build + enqueue), then the 100 deploy
//       tasks run concurrently (Promise.all of runDeployTask) so the host coalesces their restarts.
//       Both timed from the first build until every Worker serves its body through the data plane.
//
//   node --import tsx bench/deploy/run.ts [--runs 7] [--workers 100]
//
// Engine settings are the defaults (readiness_probe_interval_ms 500). Prints Markdown for BENCHMARKS.md.
import {appendFileSync, cpSync, mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker, type DeployOutcome} from '../../src/engine/deploy/deploy-worker.js'
import {runDeployTask} from '../../src/engine/deploy/task.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import {openStore, type Store} from '../../src/store/index.js'
import {startBenchHost, type HostClient, type BenchHost} from '../support/host.js'
import {FIXTURES_DIR, fixtureUpload, scriptNameFor} from '../support/fixtures.js'
import {log, median} from '../support/stats.js'

const {values: options} = parseArgs({options: {runs: {type: 'string', default: '7'}, workers: {type: 'string', default: '100'}}})
const RUNS = Number(options.runs)
const WORKERS = Number(options.workers)
const COMPANY = 'bench'
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-deploy-'))

const FIXTURES = ['hello', 'hello-v2'] as const
type Fixture = (typeof FIXTURES)[number]
/** What each fixture answers (a substring of its body), so a GET tells which version serves. */
const BODY: Record<Fixture, string> = {hello: 'Hello from an Edge Worker!', 'hello-v2': 'version 2!'}
const STAGES = ['build', 'enqueue', 'lease', 'snapshot', 'integrity', 'deploying', 'purge', 'upload', 'readback', 'readiness', 'settle'] as const

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls the data plane until the script answers 200 with `body` in it. */
async function untilServes(host: BenchHost, scriptName: string, body: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const response = await fetch(`${host.publicUrl}/${scriptName}/`)
    const text = await response.text()
    if (response.status === 200 && text.includes(body)) return
    if (Date.now() > deadline) throw new Error(`${scriptName} does not serve ${JSON.stringify(body)}: ${response.status} ${text}`)
    await sleep(5)
  }
}

async function department(store: Store, label: string): Promise<string> {
  const id = `dept-${label}`
  await store.tenants.createDepartment({id, company_id: COMPANY, name: id})
  return id
}

function assertCompleted(outcome: DeployOutcome, what: string): void {
  if (outcome.state !== 'completed') throw new Error(`${what}: deploy ${outcome.state}: ${outcome.code} ${outcome.message}`)
}

/**
 * A copy of the fixture (a build must not write into the repository) with a marker comment, so every
 * (a) run builds a new release: rebuilding a release the Worker had before reuses its version, and the
 * deploy then dedupes onto that version's completed row (same base revision) and uploads nothing.
 */
function project(fixture: Fixture, marker: string): string {
  const dir = path.join(workDir, 'projects', `${fixture}-${marker}`)
  cpSync(path.join(FIXTURES_DIR, fixture), dir, {recursive: true})
  appendFileSync(path.join(dir, 'index.js'), `// bench ${marker}\n`)
  return dir
}

/** (a) One engine deploy, stage by stage; ms from start of each stage, plus the total until served. */
async function engineDeploy(engine: Engine, host: BenchHost, departmentId: string, fixture: Fixture, run: number) {
  const projectDir = project(fixture, `run-${run}`)
  const marks: Array<{stage: string; at: number}> = []
  const started = performance.now()
  const outcome = await deployWorker(engine, {projectDir, departmentId, wait: true}, {onStage: (stage) => marks.push({stage, at: performance.now()})})
  const returned = performance.now()
  assertCompleted(outcome, `(a) ${fixture}`)
  await untilServes(host, outcome.scriptName, BODY[fixture])
  const served = performance.now()
  const stages: Record<string, number> = {}
  marks.forEach((mark, index) => {
    const end = marks[index + 1]?.at ?? returned
    stages[mark.stage] = (stages[mark.stage] ?? 0) + (end - mark.at)
  })
  stages['GET serves'] = served - returned
  return {totalMs: served - started, stages}
}

/** (a) baseline: the same fixture uploaded straight to the host, live, then served. */
async function bareDeploy(host: BenchHost, client: HostClient, scriptName: string, fixture: Fixture): Promise<number> {
  const started = performance.now()
  await client.deploy(scriptName, fixtureUpload(fixture))
  await untilServes(host, scriptName, BODY[fixture])
  return performance.now() - started
}

async function main(): Promise<void> {
  log(
    `# ${os.cpus().length} CPUs, load average ${os
      .loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}`,
  )
  const projects = {hello: project('hello', 'batch')}

  const host = await startBenchHost()
  const settings = settingsSchema.parse({data_dir: path.join(workDir, 'kit'), store: {url: ''}})
  const store = await openStore(settings)
  try {
    await store.migrate()
    const pairing = await pairWithHost(host.adminUrl, host.pairingCode!, 10_000)
    await store.kit.savePairing(pairing)
    // The management client signs with the same pairing secret (the one-time code is used up).
    const client = host.client(pairing.shared_secret)
    const engine = await createEngine(store, settings, onPremHosts)
    await store.tenants.createCompany({id: COMPANY, name: 'Bench'})

    // (a) Warm-up (first build, first script on the shard), not counted; then alternate.
    const single = await department(store, 'single')
    const bareName = scriptNameFor('bench/deploy/bare')
    await engineDeploy(engine, host, single, 'hello', -1)
    const engineRuns: Array<{totalMs: number; stages: Record<string, number>}> = []
    const bareRuns: number[] = []
    for (let run = 0; run < RUNS; run++) {
      const fixture = FIXTURES[(run + 1) % 2]!
      engineRuns.push(await engineDeploy(engine, host, single, fixture, run))
      bareRuns.push(await bareDeploy(host, client, bareName, fixture))
      log(`(a) run ${run + 1}: engine ${engineRuns.at(-1)!.totalMs.toFixed(0)} ms, bare ${bareRuns.at(-1)!.toFixed(0)} ms (${fixture})`)
    }

    // (b) Sequential: WORKERS single deploys, one after another.
    const sequentialDepartments: string[] = []
    const batchDepartments: string[] = []
    for (let index = 0; index < WORKERS; index++) sequentialDepartments.push(await department(store, `seq-${index}`))
    for (let index = 0; index < WORKERS; index++) batchDepartments.push(await department(store, `batch-${index}`))
    const sequentialStarted = performance.now()
    for (const departmentId of sequentialDepartments) {
      const outcome = await deployWorker(engine, {projectDir: projects.hello, departmentId, wait: true})
      assertCompleted(outcome, `(b) sequential ${departmentId}`)
      await untilServes(host, outcome.scriptName, BODY.hello)
    }
    const sequentialMs = performance.now() - sequentialStarted
    log(`(b) ${WORKERS} sequential deploys: ${(sequentialMs / 1000).toFixed(1)} s`)

    // (b) One pass: WORKERS enqueues (wait: false), then every deploy task at once.
    const batchStarted = performance.now()
    const enqueued: DeployOutcome[] = []
    for (const departmentId of batchDepartments) {
      const outcome = await deployWorker(engine, {projectDir: projects.hello, departmentId, wait: false})
      if (outcome.state !== 'pending') throw new Error(`(b) enqueue ${departmentId}: ${outcome.state} ${outcome.message}`)
      enqueued.push(outcome)
    }
    const enqueuedMs = performance.now() - batchStarted
    const results = await Promise.all(
      enqueued.map((outcome, index) =>
        runDeployTask(engine, {outboxId: outcome.outboxId, companyId: COMPANY, departmentId: batchDepartments[index]!, messageId: outcome.outboxId}),
      ),
    )
    // A task that does not complete is reported, not hidden: its row is left to a later pass.
    const failed = results.flatMap((result, index) => (result.outcome === 'completed' ? [] : [{index, result}]))
    for (const {index, result} of failed) log(`(b) batch: ${batchDepartments[index]} did not complete: ${JSON.stringify(result)}`)
    await Promise.all(
      enqueued.filter((_, index) => results[index]!.outcome === 'completed').map((outcome) => untilServes(host, outcome.scriptName, BODY.hello)),
    )
    const batchMs = performance.now() - batchStarted
    log(`(b) ${WORKERS} in one pass: ${(batchMs / 1000).toFixed(1)} s (enqueue ${(enqueuedMs / 1000).toFixed(1)} s)`)

    // Report.
    const engineMedian = median(engineRuns.map((run) => run.totalMs))
    const bareMedian = median(bareRuns)
    const stageNames = [...STAGES, 'GET serves'].filter((stage) => engineRuns.some((run) => run.stages[stage] !== undefined))
    console.log(
      `\n${new Date().toISOString()} — ${os.cpus().length} CPUs, load average ${os
        .loadavg()
        .map((value) => value.toFixed(1))
        .join(' ')}\n`,
    )
    console.log(`(a) redeploy of one Worker until the new body serves, ${RUNS} runs alternating hello / hello-v2:\n`)
    console.log('| measure | median ms | min ms | max ms |')
    console.log('|---|---|---|---|')
    console.log(
      `| bare shard restart: upload via management API → live → GET (baseline) | ${bareMedian.toFixed(0)} | ${Math.min(...bareRuns).toFixed(0)} | ${Math.max(...bareRuns).toFixed(0)} |`,
    )
    console.log(
      `| \`deployWorker\` → new body served | ${engineMedian.toFixed(0)} | ${Math.min(...engineRuns.map((run) => run.totalMs)).toFixed(0)} | ${Math.max(...engineRuns.map((run) => run.totalMs)).toFixed(0)} |`,
    )
    console.log(`\nratio of medians deployWorker / bare: **${(engineMedian / bareMedian).toFixed(2)}**\n`)
    console.log('| stage | median ms |')
    console.log('|---|---|')
    for (const stage of stageNames) console.log(`| ${stage} | ${median(engineRuns.map((run) => run.stages[stage] ?? 0)).toFixed(1)} |`)
    console.log(`\n(b) ${WORKERS} Workers:\n`)
    console.log('| how | wall s | per Worker ms |')
    console.log('|---|---|---|')
    console.log(
      `| ${WORKERS} sequential \`deployWorker\` (wait: true) (baseline) | ${(sequentialMs / 1000).toFixed(1)} | ${(sequentialMs / WORKERS).toFixed(0)} |`,
    )
    console.log(
      `| one pass: ${WORKERS} enqueues (wait: false, ${(enqueuedMs / 1000).toFixed(1)} s) + ${WORKERS} concurrent deploy tasks | ${(batchMs / 1000).toFixed(1)} | ${(batchMs / WORKERS).toFixed(0)} |`,
    )
    console.log(`\nratio sequential / one pass: **${(sequentialMs / batchMs).toFixed(2)}×** faster in one pass`)
    console.log(
      `\none pass: ${WORKERS - failed.length} of ${WORKERS} tasks completed; not completed: ${JSON.stringify(failed.map(({result}) => (result.outcome === 'retry' ? result.code : result.outcome)))}`,
    )
  } finally {
    await store.close()
    await host.stop()
  }
}

try {
  await main()
} finally {
  rmSync(workDir, {recursive: true, force: true})
}
