// Control-plane benchmark, on a SQLite store and a real edge host (startBenchHost: in-process, one
// workerd shard), all in one run, alternating each measured call with its baseline:
//   (a) `secret put` (applyControl: what `edgeworkers secret put` runs — host revision read, outbox
//       row, mutation, receipt read and validation, settle + audit row, ack) from its start until the
//       Worker answers with the new value through the data plane; baseline: the bare signed
//       PUT /v1/scripts/:name/secrets/:secret to another script running the same code, then the same
//       polling.
//   (b) `access-policy set` (applyControl, access_policy.replace) from its start until the data plane
//       enforces it (a GET answers 403 after teamsync_internal with an empty allowlist, then 200 after
//       public: two changes per run); baseline: the bare signed PUT /v1/scripts/:name/access-policy,
//       then the same GET.
//
//   node --import tsx bench/control/run.ts [--runs 15]
//
// Prints Markdown for BENCHMARKS.md.
import {mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {applyControl, type ControlRequest} from '../../src/engine/control/apply.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {paths} from '../support/paths.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import {openStore} from '../../src/store/index.js'
import {startBenchHost, type HostClient, type BenchHost} from '../support/host.js'
import {FIXTURES_DIR, fixtureUpload, scriptNameFor} from '../support/fixtures.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({options: {runs: {type: 'string', default: '15'}}})
const RUNS = Number(options.runs)
const CONTROL_ENV = path.join(FIXTURES_DIR, 'control-env')
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-control-'))
const ACTOR = {type: 'operator', id: 'bench'}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

const tokenOf = async (host: BenchHost, scriptName: string) => {
  const response = await fetch(`${host.publicUrl}/${scriptName}/`)
  return response.status === 200 ? ((await response.json()) as {token: string | null}).token : null
}
const statusOf = async (host: BenchHost, scriptName: string) => {
  const response = await fetch(`${host.publicUrl}/${scriptName}/`)
  await response.arrayBuffer()
  return response.status
}

async function timed(work: () => Promise<void>): Promise<number> {
  const start = performance.now()
  await work()
  return performance.now() - start
}

async function control(engine: Engine, departmentId: string, request: ControlRequest): Promise<void> {
  const {outcome} = await applyControl(engine, {departmentId, request, actor: ACTOR})
  if (outcome.state !== 'completed') throw new Error(`${request.operation}: ${outcome.state} ${outcome.code} ${outcome.message}`)
}

async function bare(client: HostClient, method: string, target: string, body: unknown): Promise<void> {
  const response = await client.call(method, target, body)
  if (response.status !== 200) throw new Error(`${method} ${target}: ${response.status} ${response.text}`)
}

async function main(): Promise<void> {
  log(`# ${machineLoad()}`)
  const host = await startBenchHost({settings: {shards: 1}})
  const settings = settingsSchema.parse({data_dir: path.join(workDir, 'kit'), store: {url: ''}})
  const store = await openStore(settings, {create: true})
  try {
    await store.migrate()
    const pairing = await pairWithHost(host.adminUrl, host.pairingCode!, 10_000)
    await store.kit.savePairing(pairing)
    const client = host.client(pairing.shared_secret)
    const engine = await createEngine(store, settings, onPremHosts)
    await store.tenants.createCompany({id: 'bench', name: 'Bench'})
    await store.tenants.createDepartment({id: 'dept-control', company_id: 'bench', name: 'control'})
    const deployed = await deployWorker(engine, {projectDir: CONTROL_ENV, departmentId: 'dept-control', wait: true})
    if (deployed.state !== 'completed') throw new Error(`deploy ${deployed.state}: ${deployed.message}`)
    const kitScript = deployed.scriptName
    const bareScript = scriptNameFor('bench/control/bare')
    await client.deploy(bareScript, fixtureUpload('control-env'))

    const secret = {kit: [] as number[], bare: [] as number[]}
    const policy = {kit: [] as number[], bare: [] as number[]}
    for (let run = -1; run < RUNS; run++) {
      // Run -1 warms both paths up and is not counted.
      const value = `value-${run}-${Date.now()}`
      const kitSecret = await timed(async () => {
        await control(engine, 'dept-control', {operation: 'secrets.put', name: 'TOKEN', value})
        await until(async () => (await tokenOf(host, kitScript)) === value, 'the kit secret')
      })
      const bareSecret = await timed(async () => {
        await bare(client, 'PUT', paths.secret(bareScript, 'TOKEN'), {value})
        await until(async () => (await tokenOf(host, bareScript)) === value, 'the bare secret')
      })
      // Closed, then open again: the secret poll of the next run goes through a public policy.
      const policyTimes: Array<[number, number]> = []
      for (const [mode, expected] of [
        ['teamsync_internal', 403],
        ['public', 200],
      ] as const) {
        const kitPolicy = await timed(async () => {
          await control(engine, 'dept-control', {operation: 'access_policy.replace', mode, ipAllowlist: []})
          await until(async () => (await statusOf(host, kitScript)) === expected, 'the kit policy')
        })
        const barePolicy = await timed(async () => {
          await bare(client, 'PUT', paths.accessPolicy(bareScript), mode === 'public' ? {mode} : {mode, ipAllowlist: []})
          await until(async () => (await statusOf(host, bareScript)) === expected, 'the bare policy')
        })
        policyTimes.push([kitPolicy, barePolicy])
      }
      if (run >= 0) {
        secret.kit.push(kitSecret)
        secret.bare.push(bareSecret)
        for (const [kit, baseline] of policyTimes) {
          policy.kit.push(kit)
          policy.bare.push(baseline)
        }
      }
      log(
        `run ${run}: secret ${kitSecret.toFixed(0)} / ${bareSecret.toFixed(0)} ms, policy ${policyTimes.map(([kit, baseline]) => `${kit.toFixed(1)} / ${baseline.toFixed(1)}`).join(', ')} ms`,
      )
    }

    const row = (what: string, figures: {kit: number[]; bare: number[]}) => {
      const kit = median(figures.kit)
      const baseline = median(figures.bare)
      return `| ${what} | ${kit.toFixed(1)} | ${baseline.toFixed(1)} | ${(kit / baseline).toFixed(2)} |`
    }
    console.log(`Medians over ${RUNS} runs (policy: ${RUNS * 2} changes, closing and opening) — ${machineLoad()} at the end:\n`)
    console.log('| change → effect | kit command (ms) | bare host call (ms) | ratio |')
    console.log('|---|---|---|---|')
    console.log(row('`secret put` → the Worker answers with the new value', secret))
    console.log(row('`access-policy set` → the data plane enforces it', policy))
  } finally {
    await store.close()
    await host.stop()
    rmSync(workDir, {recursive: true, force: true})
  }
}

await main()
