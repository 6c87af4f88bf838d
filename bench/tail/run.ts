// Tail benchmark, in one run against real hosts running real workerd:
//   1. data-plane throughput of a Worker that logs one console line per request, interleaved rounds:
//      the host with host.worker_events off (no tail Worker at all: the baseline), on with no tail
//      attached, and on with one `edgeworkers tail --format json` attached (the real CLI, its output
//      drained by this process; at the default host.tail_max_events_per_second, so it gets that
//      many events per second and sampled notices for the rest); ratios against the baseline and
//      against "no tail attached";
//   2. the delay from a Worker's console.log to the line `edgeworkers tail` prints: paced requests,
//      each logging its own Date.now(); the delay is the time this process reads the line minus that.
//
//   node --import tsx bench/tail/run.ts [--seconds 8] [--connections 32] [--rounds 3] [--samples 200] [--settle-seconds N]
//
// With --settle-seconds (host.loader_settle_seconds), the Worker is measured on its own socket, as a host serves it once
// deploys settled: untailed it runs behind the counting main module, and a tail sees host.tail_max_events_per_second of
// its requests a second through the shard's loader (src/edge-host/runtime/traced-requests.ts). Without it (the default's
// 300 s outlasts the run) the Worker stays in the shard's loader, which traces every request.
//
// The load generator is ../host/load.ts, in its own process. Prints a Markdown summary for BENCHMARKS.md.
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import pino from 'pino'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {startHost, type RunningHost} from '../../src/edge-host/host.js'
import type {TailLine} from '../../src/protocol/tail.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import {openStore} from '../../src/store/index.js'
import {log, machineLoad, median, percentile} from '../support/stats.js'

const {values: options} = parseArgs({
  options: {
    seconds: {type: 'string', default: '8'},
    connections: {type: 'string', default: '32'},
    rounds: {type: 'string', default: '3'},
    samples: {type: 'string', default: '200'},
    'settle-seconds': {type: 'string'},
  },
})
const SETTLE_SECONDS = options['settle-seconds'] === undefined ? undefined : Number(options['settle-seconds'])
const SECONDS = Number(options.seconds)
const CONNECTIONS = Number(options.connections)
const ROUNDS = Number(options.rounds)
const SAMPLES = Number(options.samples)
const LOAD = fileURLToPath(new URL('../host/load.ts', import.meta.url))
const CLI = fileURLToPath(new URL('../../bin/run.js', import.meta.url))
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-tail-'))

const WORKER = `export default {
  fetch(request) {
    console.log('hit', new URL(request.url).pathname, Date.now())
    return new Response('ok')
  },
}
`

interface Kit {
  host: RunningHost
  dataDir: string
  department: string
  script: string
}

/** A host (worker_events on or off) and a kit store paired with it, with the logging Worker deployed. */
async function startKit(label: string, workerEvents: boolean): Promise<Kit> {
  const root = path.join(workDir, label)
  const project = path.join(root, 'project')
  mkdirSync(project, {recursive: true})
  writeFileSync(path.join(project, 'index.js'), WORKER)
  writeFileSync(
    path.join(project, 'edgeworker.json'),
    JSON.stringify({
      name: 'bench-tail',
      main: 'index.js',
      modules: ['index.js'],
      compatibilityDate: '2026-11-01',
      builderPolicy: 'department-worker-project-v2.9',
      staticData: {},
      dependencies: {},
    }),
  )
  const host = await startHost({
    dataDir: path.join(root, 'host'),
    settings: {
      listen: '127.0.0.1:0',
      admin_listen: '127.0.0.1:0',
      shards: 1,
      worker_events: workerEvents,
      ...(SETTLE_SECONDS === undefined ? {} : {loader_settle_seconds: SETTLE_SECONDS}),
    },
    logger: pino({level: 'silent'}),
  })
  const dataDir = path.join(root, 'kit')
  const settings = settingsSchema.parse({data_dir: dataDir})
  const store = await openStore(settings)
  await store.migrate()
  await store.kit.savePairing(await pairWithHost(host.adminUrl, host.issuedPairingCode!, 10_000))
  await store.tenants.createCompany({id: 'acme', name: 'Acme'})
  await store.tenants.createDepartment({id: 'acme-bench', company_id: 'acme', name: 'Bench'})
  const outcome = await deployWorker(await createEngine(store, settings, onPremHosts), {projectDir: project, departmentId: 'acme-bench', wait: true})
  if (outcome.state !== 'completed') throw new Error(`deploy ${outcome.state}: ${outcome.message}`)
  await store.close()
  if (SETTLE_SECONDS !== undefined) await settled(host, 1)
  return {host, dataDir, department: 'acme-bench', script: outcome.scriptName}
}

/** Waits for the host's `count`th settle swap (the Worker on its own socket). */
async function settled(host: RunningHost, count: number): Promise<void> {
  const settles = async () => {
    const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
    return Number(/^edgeworkers_host_shard_restarts_total\{shard="0",reason="settle"\} (\d+)$/m.exec(text)?.[1] ?? 0)
  }
  const deadline = Date.now() + 60_000
  while ((await settles()) < count) {
    if (Date.now() > deadline) throw new Error(`no settle swap #${count} within 60 s`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** `edgeworkers tail --format json`, each line handed to `onLine` with the time it was read. */
/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

async function startTail(kit: Kit, onLine: (line: string, readAt: number) => void): Promise<{stop(): Promise<number>}> {
  const child: ChildProcess = spawn(process.execPath, [CLI, 'tail', kit.department, '--format', 'json', '--data-dir', kit.dataDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let pending = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    const readAt = Date.now()
    pending += chunk.toString()
    const lines = pending.split('\n')
    pending = lines.pop()!
    for (const line of lines) if (line) onLine(line, readAt)
  })
  // It says "tailing …" on stderr once it resolved the Worker; then it attaches: wait for an event.
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (chunk: Buffer) => (chunk.toString().includes('tailing') ? resolve() : undefined))
    child.once('exit', (code) => reject(new Error(`tail exited ${code}`)))
  })
  let seen = false
  const previous = onLine
  onLine = (line, readAt) => ((seen = true), previous(line, readAt))
  while (!seen) {
    await fetch(`${kit.host.publicUrl}/${kit.script}/attach`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const cpuAtAttach = cpuSeconds(child.pid!)
  return {
    /** Ends the tail; the CPU seconds it used since it attached. */
    stop: async () => {
      const used = cpuSeconds(child.pid!) - cpuAtAttach
      child.kill('SIGINT')
      await new Promise((resolve) => child.once('exit', resolve))
      return used
    },
  }
}

interface LoadResult {
  requests: number
  rps: number
  p50Ms: number
  p99Ms: number
  failures: number
}

async function load(url: string): Promise<LoadResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', LOAD, url, String(CONNECTIONS), String(SECONDS)], {stdio: ['ignore', 'pipe', 'inherit']})
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  if (code !== 0) throw new Error(`load generator exited ${code}`)
  return JSON.parse(output) as LoadResult
}

async function main(): Promise<void> {
  log(`tail bench: ${ROUNDS} rounds × ${SECONDS} s, ${CONNECTIONS} connections; ${machineLoad()}`)
  const off = await startKit('off', false)
  const on = await startKit('on', true)
  const results: Record<'off' | 'on' | 'tailed', LoadResult[]> = {off: [], on: [], tailed: []}
  let tailedEvents = 0
  let sampledOut = 0
  const tailCpu: number[] = []
  const hostCpu: Record<'on' | 'tailed', number[]> = {on: [], tailed: []}
  // CPU µs per request of the host process and its shard's workerd together: steadier than req/s on a busy machine.
  const cpuPerRequest: Record<'on' | 'tailed', number[]> = {on: [], tailed: []}
  const shardPid = () =>
    Number(
      readdirSync(path.join(on.host.dataDir, 'runtime', 'pids'))
        .find((file) => file.startsWith('shard-'))!
        .split('.')
        .at(-1),
    )
  const hostCpuDuring = async (key: 'on' | 'tailed', work: () => Promise<LoadResult>): Promise<LoadResult> => {
    const before = process.cpuUsage()
    const workerd = {pid: shardPid(), seconds: cpuSeconds(shardPid())}
    const result = await work()
    const used = process.cpuUsage(before)
    hostCpu[key].push((used.user + used.system) / 1e6)
    cpuPerRequest[key].push((((used.user + used.system) / 1e6 + cpuSeconds(workerd.pid) - workerd.seconds) * 1e6) / result.requests)
    return result
  }
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      results.off.push(await load(`${off.host.publicUrl}/${off.script}/load`))
      results.on.push(await hostCpuDuring('on', () => load(`${on.host.publicUrl}/${on.script}/load`)))
      const tail = await startTail(on, (line) => {
        const parsed = JSON.parse(line) as TailLine
        if ('type' in parsed) sampledOut += parsed.skipped
        else tailedEvents++
      })
      results.tailed.push(await hostCpuDuring('tailed', () => load(`${on.host.publicUrl}/${on.script}/load`)))
      tailCpu.push(await tail.stop())
      log(
        `round ${round}: off ${results.off.at(-1)!.rps.toFixed(0)}/s, on ${results.on.at(-1)!.rps.toFixed(0)}/s, one tail ${results.tailed.at(-1)!.rps.toFixed(0)}/s; ${machineLoad()}`,
      )
    }

    // Delay: one request at a time, paced, each logging its Date.now(); the tail prints it.
    const delays: number[] = []
    const tail = await startTail(on, (line, readAt) => {
      const event = JSON.parse(line) as TailLine
      if ('type' in event || !event.path.startsWith('/delay')) return
      const loggedAt = Number(event.logs[0]!.message.split(' ').at(-1))
      delays.push(readAt - loggedAt)
    })
    for (let sample = 0; sample < SAMPLES; sample++) {
      await fetch(`${on.host.publicUrl}/${on.script}/delay-${sample}`).then((response) => response.text())
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const deadline = Date.now() + 10_000
    while (delays.length < SAMPLES && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
    await tail.stop()

    const rps = (list: LoadResult[]) => median(list.map((result) => result.rps))
    const p99 = (list: LoadResult[]) => median(list.map((result) => result.p99Ms))
    const failures = (list: LoadResult[]) => list.reduce((sum, result) => sum + result.failures, 0)
    const settle = SETTLE_SECONDS === undefined ? '' : ` --settle-seconds ${SETTLE_SECONDS}`
    console.log(`### Tail (\`node --import tsx bench/tail/run.ts --seconds ${SECONDS} --connections ${CONNECTIONS} --rounds ${ROUNDS} --samples ${SAMPLES}${settle}\`)

Machine: ${machineLoad()} (at the end of the run).

| host | requests/s (median of ${ROUNDS}) | p99 ms | failures | vs worker_events off | vs no tail attached |
|---|---:|---:|---:|---:|---:|
| host.worker_events off (no tail Worker) | ${rps(results.off).toFixed(0)} | ${p99(results.off).toFixed(1)} | ${failures(results.off)} | 1.00× | |
| worker_events on, no tail attached | ${rps(results.on).toFixed(0)} | ${p99(results.on).toFixed(1)} | ${failures(results.on)} | ${(rps(results.on) / rps(results.off)).toFixed(2)}× | 1.00× |
| worker_events on, one \`tail --format json\` attached | ${rps(results.tailed).toFixed(0)} | ${p99(results.tailed).toFixed(1)} | ${failures(results.tailed)} | ${(rps(results.tailed) / rps(results.off)).toFixed(2)}× | ${(rps(results.tailed) / rps(results.on)).toFixed(2)}× |

Events the attached tail printed during its load rounds: ${tailedEvents}; sampled out (the host's notices, host.tail_max_events_per_second): ${sampledOut}. CPU seconds per ${SECONDS} s round (medians): the host process ${median(hostCpu.on).toFixed(2)} without a tail, ${median(hostCpu.tailed).toFixed(2)} with one; the \`tail\` process ${median(tailCpu).toFixed(2)}. Host and workerd CPU µs per request (medians): ${median(cpuPerRequest.on).toFixed(0)} without a tail, ${median(cpuPerRequest.tailed).toFixed(0)} with one (per round, tailed ÷ untailed: ${median(cpuPerRequest.tailed.map((tailed, round) => tailed / cpuPerRequest.on[round]!)).toFixed(2)}×).

console.log → line printed by \`edgeworkers tail\`: ${delays.length}/${SAMPLES} samples, median ${median(delays).toFixed(0)} ms, p99 ${percentile(delays, 99).toFixed(0)} ms, max ${Math.max(...delays).toFixed(0)} ms.`)
  } finally {
    await off.host.stop()
    await on.host.stop()
    rmSync(workDir, {recursive: true, force: true})
  }
}

await main()
