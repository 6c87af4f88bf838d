// Rollback benchmark (issue #34's aim: rollback ≤ 1.2× a deploy of an unchanged version, same run), on
// a SQLite store and a real edge host (startBenchHost). One department has served version A (hello)
// and then B (hello-v2). Each round measures, interleaved and in alternating order, from the call
// until A's body is served through the data plane:
//   - baseline: `deployWorker` of A's unchanged project — the old way back: rebuild, new version, deploy;
//   - subject:  `rollbackWorker --to A` — a copy of A's stored version, no build, the same deploy task.
// Between the two, B is made current again (`rollbackWorker --to B`, not counted).
//
//   node --import tsx bench/deploy/rollback.ts [--runs 7]
import {cpSync, mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {rollbackWorker} from '../../src/engine/deploy/rollback.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import {openStore} from '../../src/store/index.js'
import {FIXTURES_DIR} from '../support/fixtures.js'
import {type BenchHost, startBenchHost} from '../support/host.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({options: {runs: {type: 'string', default: '7'}}})
const RUNS = Number(options.runs)
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-rollback-'))
const ACTOR = {type: 'operator', id: 'bench'}
const BODY_A = 'Hello from an Edge Worker!'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function untilServes(host: BenchHost, scriptName: string, body: string): Promise<void> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const response = await fetch(`${host.publicUrl}/${scriptName}/`)
    const text = await response.text()
    if (response.status === 200 && text.includes(body)) return
    if (Date.now() > deadline) throw new Error(`${scriptName} does not serve ${JSON.stringify(body)}: ${response.status} ${text}`)
    await sleep(5)
  }
}

/** Runs `change` and returns ms until A's body serves; throws unless the deploy completed. */
async function timed(host: BenchHost, change: () => Promise<{state: string; scriptName: string}>): Promise<number> {
  const started = performance.now()
  const outcome = await change()
  if (outcome.state !== 'completed') throw new Error(`deploy ${outcome.state}`)
  await untilServes(host, outcome.scriptName, BODY_A)
  return performance.now() - started
}

async function main(): Promise<void> {
  log(`# ${machineLoad()}`)
  const projectA = path.join(workDir, 'a')
  const projectB = path.join(workDir, 'b')
  cpSync(path.join(FIXTURES_DIR, 'hello'), projectA, {recursive: true})
  cpSync(path.join(FIXTURES_DIR, 'hello-v2'), projectB, {recursive: true})

  const host = await startBenchHost()
  const settings = settingsSchema.parse({data_dir: path.join(workDir, 'kit'), store: {url: ''}})
  const store = await openStore(settings)
  try {
    await store.migrate()
    await store.kit.savePairing(await pairWithHost(host.adminUrl, host.pairingCode!, 10_000))
    const engine: Engine = await createEngine(store, settings, onPremHosts)
    await store.tenants.createCompany({id: 'bench', name: 'Bench'})
    await store.tenants.createDepartment({id: 'dept-rollback', company_id: 'bench', name: 'rollback'})
    const departmentId = 'dept-rollback'
    for (const [projectDir, tag] of [
      [projectA, 'a'],
      [projectB, 'b'],
    ] as const) {
      const outcome = await deployWorker(engine, {projectDir, departmentId, wait: true, notes: {tag}})
      if (outcome.state !== 'completed') throw new Error(`setup deploy ${outcome.state}`)
    }
    const backToB = async () => {
      if ((await rollbackWorker(engine, {departmentId, to: 'b', wait: true, actor: ACTOR})).state !== 'completed') throw new Error('back to B')
    }
    const redeploy = () => timed(host, () => deployWorker(engine, {projectDir: projectA, departmentId, wait: true}))
    const rollback = () => timed(host, () => rollbackWorker(engine, {departmentId, to: 'a', wait: true, actor: ACTOR}))

    // Warm-up of both paths, not counted.
    await redeploy()
    await backToB()
    await rollback()
    await backToB()
    const deploys: number[] = []
    const rollbacks: number[] = []
    for (let run = 0; run < RUNS; run++) {
      const order = run % 2 === 0 ? ([redeploy, rollback] as const) : ([rollback, redeploy] as const)
      for (const measure of order) {
        const ms = await measure()
        ;(measure === redeploy ? deploys : rollbacks).push(ms)
        await backToB()
      }
      log(`run ${run + 1}: deploy of A's project ${deploys.at(-1)!.toFixed(0)} ms, rollback to A ${rollbacks.at(-1)!.toFixed(0)} ms`)
    }

    console.log(`\n${new Date().toISOString()} — ${machineLoad()}\n`)
    console.log(`The old version served again, ${RUNS} interleaved runs:\n`)
    console.log('| measure | median ms | min ms | max ms |')
    console.log('|---|---|---|---|')
    console.log(`| \`deployWorker\` of the old, unchanged project → its body served (baseline) | ${row(deploys)} |`)
    console.log(`| \`rollbackWorker --to\` the old version → its body served | ${row(rollbacks)} |`)
    console.log(`\nratio of medians rollback / deploy: **${(median(rollbacks) / median(deploys)).toFixed(2)}**`)
  } finally {
    await store.close()
    await host.stop()
  }
}

function row(values: number[]): string {
  return `${median(values).toFixed(0)} | ${Math.min(...values).toFixed(0)} | ${Math.max(...values).toFixed(0)}`
}

try {
  await main()
} finally {
  rmSync(workDir, {recursive: true, force: true})
}
