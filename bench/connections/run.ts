// Connection budgets (issue 29): `host serve` as its own process with default settings, one Worker;
// a client of its own address (127.0.0.200, 8 keep-alive connections, closed loop) measures
// requests to it for SECONDS, alternately on the quiet host (the baseline) and while an attacker
// process (./attacker.ts) holds IDLE idle and SLOW slowloris connections from 127.0.0.2, reopening
// each a second after the host closes it. Rounds interleave, so both see the same machine; the
// ratio is the median over rounds of p99 under attack ÷ the baseline p99 of the same round. The
// host's RSS (VmRSS of its process, not its workerd shards): before the round, the peak of the
// quiet phase (the client's own load grows it), the peak under attack, and 5 s and --settle s after
// the attacker left. Each round also logs what the other client's failures
// were (a status, or the error's code), the host's heap and Buffer memory from its /metrics, the
// CPU the host and the attacker used a second (/proc/<pid>/stat), the host's refusals a second and
// its event-loop delay (p99 / max) in each phase.
// The attacker runs at nice 19 by default: a real one's CPU is not on the host's cores.
// HOST_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") are given to the host's node.
//
//   node --import tsx bench/connections/run.ts [--rounds 3] [--seconds 10] [--idle 5000] [--slow 500] [--settle 30] [--attacker-nice 19]
import {fork, spawn} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {Pool} from 'undici'
import {readHostInfo, type HostInfo} from '../../src/edge-host/host-info.js'
import {HostClient, pairHost} from '../support/host.js'
import {scriptNameFor, textWorker} from '../support/fixtures.js'
import {log, machineLoad, median, percentile} from '../support/stats.js'

const {values: options} = parseArgs({
  options: {
    rounds: {type: 'string', default: '3'},
    seconds: {type: 'string', default: '10'},
    idle: {type: 'string', default: '5000'},
    slow: {type: 'string', default: '500'},
    settle: {type: 'string', default: '30'},
    'attacker-nice': {type: 'string', default: '19'},
  },
})
const ROUNDS = Number(options.rounds)
const SECONDS = Number(options.seconds)
const IDLE = Number(options.idle)
const SLOW = Number(options.slow)
const SETTLE_SECONDS = Math.max(5, Number(options.settle))
const ATTACKER_NICE = Number(options['attacker-nice'])
const CLIENT_CONNECTIONS = 8
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const ATTACKER = fileURLToPath(new URL('./attacker.ts', import.meta.url))
const MiB = 1024 * 1024
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface AttackerCounts {
  open: number
  closed: number
  opened: number
}

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-conns-'))
let stdout = ''
let stderr = ''
const host = spawn(
  process.execPath,
  [
    ...(process.env.HOST_NODE_ARGS?.split(' ') ?? []),
    path.join(ROOT, 'bin/run.js'),
    'host',
    'serve',
    '--data-dir',
    dataDir,
    '--listen',
    '127.0.0.1:0',
    '--admin-listen',
    '127.0.0.1:0',
  ],
  {
    env: {...process.env, EDGEWORKERS_LOG_FORMAT: 'json', EDGEWORKERS_CONFIG: undefined, EDGEWORKERS_DATA_DIR: undefined},
  },
)
host.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
host.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))

/** CPU time (user + system, ms) a process has used so far, from the kernel's account. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 a second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10
}

function hostRss(): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${host.pid}/status`, 'utf8'))
  return Number(match?.[1]) * 1024
}

async function started(): Promise<HostInfo> {
  for (let waited = 0; waited < 60_000; waited += 100) {
    const info = await readHostInfo(dataDir)
    if (info) return info
    await sleep(100)
  }
  throw new Error(`host serve did not start: ${stderr}`)
}

/** Closed-loop requests for SECONDS from the client's own address: latencies (ms) and failures. */
async function measure(url: string): Promise<{latencies: number[]; failures: number; kinds: Map<string, number>}> {
  const pool = new Pool(url, {connections: CLIENT_CONNECTIONS, connect: {localAddress: '127.0.0.200'}})
  const latencies: number[] = []
  let failures = 0
  /** What each failure was: a status, or the error's code. */
  const kinds = new Map<string, number>()
  const failed = (kind: string) => {
    failures++
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1)
  }
  const end = Date.now() + SECONDS * 1000
  await Promise.all(
    Array.from({length: CLIENT_CONNECTIONS}, async () => {
      while (Date.now() < end) {
        const began = performance.now()
        try {
          const response = await pool.request({path: `/${name}/`, method: 'GET', headersTimeout: 10_000})
          await response.body.text()
          if (response.statusCode === 200) latencies.push(performance.now() - began)
          else failed(`status ${response.statusCode}`)
        } catch (error) {
          failed((error as {code?: string}).code ?? String(error))
        }
      }
    }),
  )
  await pool.close()
  return {latencies, failures, kinds}
}

/** The host's heap and off-heap (Buffers) figures, MB, from its /metrics process gauges. */
async function hostMemory(adminUrl: string): Promise<string> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text()
  const gauge = (name: string) => Math.round(Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1]) / MiB)
  return `heap ${gauge('nodejs_heap_size_used_bytes')}/${gauge('nodejs_heap_size_total_bytes')} external ${gauge('nodejs_external_memory_bytes')}`
}

/** The host's event-loop delay since the last scrape (prom-client resets it at each): p99 / max ms. */
async function hostLoopDelay(adminUrl: string): Promise<string> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text()
  const ms = (name: string) => (Number(new RegExp(`^nodejs_eventloop_lag_${name}_seconds (\\S+)`, 'm').exec(text)?.[1]) * 1000).toFixed(0)
  return `${ms('p99')} / ${ms('max')}`
}

/** The host's own count of client connections held and shed, from its /metrics. */
async function hostConnections(adminUrl: string): Promise<{open: number; shed: number}> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text()
  const sum = (pattern: RegExp) => [...text.matchAll(pattern)].reduce((total, match) => total + Number(match[1]), 0)
  return {open: sum(/^edgeworkers_host_connections_open (\d+)/gm), shed: sum(/^edgeworkers_host_connections_shed_total\{[^}]*\} (\d+)/gm)}
}

const name = scriptNameFor('bench/connections')
try {
  const info = await started()
  // The code is printed on stderr, which may arrive after the info file is written.
  while (!/pairing code: \S+\s/.test(stderr)) await sleep(50)
  const code = /pairing code: (\S+)\s/.exec(stderr)?.[1]
  const secret = await pairHost(info.adminUrl, code!)
  await new HostClient(info.adminUrl, secret).deploy(name, textWorker('hello'))
  const fdLine = stdout.split('\n').find((line) => line.includes('"msg":"file descriptor limit'))
  log(`host ${host.pid}: ${fdLine}`)

  const rows: string[] = []
  const ratios: number[] = []
  for (let round = 1; round <= ROUNDS; round++) {
    const quietRss = hostRss()
    const quietMemory = await hostMemory(info.adminUrl)
    // The client's own load grows the heap too: the attack is compared with the quiet phase's peak.
    let quietPeakRss = quietRss
    const quietSampler = setInterval(() => (quietPeakRss = Math.max(quietPeakRss, hostRss())), 200)
    const quietCpu = cpuMs(host.pid!)
    const quiet = await measure(info.publicUrl)
    const quietHostCpu = cpuMs(host.pid!) - quietCpu
    const quietDelay = await hostLoopDelay(info.adminUrl)
    clearInterval(quietSampler)
    const attacker = fork(ATTACKER, [info.publicUrl, String(IDLE), String(SLOW), '127.0.0.2'], {execArgv: ['--import', 'tsx']})
    // A real attacker's CPU is its own machine's; here it shares the host's cores, so by default it
    // runs at the lowest priority (its CPU is reported beside the figures; --attacker-nice 0 to compare).
    os.setPriority(attacker.pid!, ATTACKER_NICE)
    let counts: AttackerCounts = {open: 0, closed: 0, opened: 0}
    attacker.on('message', (message) => (counts = message as AttackerCounts))
    // Every first connection has been answered, held or refused.
    while (counts.opened < IDLE + SLOW || counts.open + counts.closed < IDLE + SLOW) await sleep(200)
    let peakRss = hostRss()
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, hostRss())), 200)
    const attackedCpu = {host: cpuMs(host.pid!), attacker: cpuMs(attacker.pid!)}
    const shedBefore = (await hostConnections(info.adminUrl)).shed
    const attacked = await measure(info.publicUrl)
    const attackedHostCpu = cpuMs(host.pid!) - attackedCpu.host
    const attackerCpu = cpuMs(attacker.pid!) - attackedCpu.attacker
    const attackedDelay = await hostLoopDelay(info.adminUrl)
    clearInterval(sampler)
    const held = await hostConnections(info.adminUrl)
    const attackedMemory = await hostMemory(info.adminUrl)
    attacker.send('stop')
    await new Promise((resolve) => attacker.once('exit', resolve))
    await sleep(5_000)
    const afterRss = hostRss()
    const afterMemory = await hostMemory(info.adminUrl)
    // The heap is collected when V8 chooses, so also a longer settle.
    await sleep(SETTLE_SECONDS * 1000 - 5_000)
    const settledRss = hostRss()
    log(
      `round ${round}: attacked failures ${JSON.stringify(Object.fromEntries(attacked.kinds))}, quiet failures ${JSON.stringify(Object.fromEntries(quiet.kinds))}; ` +
        `CPU ms/s quiet host ${Math.round(quietHostCpu / SECONDS)}, attacked host ${Math.round(attackedHostCpu / SECONDS)}, attacker ${Math.round(attackerCpu / SECONDS)}; ` +
        `host refusals/s under attack ${Math.round((held.shed - shedBefore) / SECONDS)}; ` +
        `host event-loop delay p99 / max ms quiet ${quietDelay}, attacked ${attackedDelay}; ` +
        `host memory MB quiet ${quietMemory}, attacked ${attackedMemory}, 5 s after ${afterMemory}, ${SETTLE_SECONDS} s after ${await hostMemory(info.adminUrl)}`,
    )
    const p99Quiet = percentile(quiet.latencies, 99)
    const p99Attacked = percentile(attacked.latencies, 99)
    ratios.push(p99Attacked / p99Quiet)
    rows.push(
      `| ${round} | ${quiet.latencies.length} / ${quiet.failures} | ${percentile(quiet.latencies, 50).toFixed(2)} / ${p99Quiet.toFixed(2)} | ${attacked.latencies.length} / ${attacked.failures} | ${percentile(attacked.latencies, 50).toFixed(2)} / ${p99Attacked.toFixed(2)} | ${(p99Attacked / p99Quiet).toFixed(2)} | ${held.open} | ${held.shed} | ${Math.round(quietRss / MiB)} / ${Math.round(quietPeakRss / MiB)} / ${Math.round(peakRss / MiB)} / ${Math.round(afterRss / MiB)} / ${Math.round(settledRss / MiB)} |`,
    )
    log(rows.at(-1)!)
  }
  console.log(
    `${new Date().toISOString().slice(0, 10)}, ${machineLoad()}; ${IDLE} idle + ${SLOW} slowloris connections from one address (attacker at nice ${ATTACKER_NICE}), ${SECONDS} s per phase`,
  )
  console.log(`host: ${fdLine}\n`)
  console.log(
    `| round | quiet: ok / failed | quiet p50 / p99 ms | attacked: ok / failed | attacked p50 / p99 ms | p99 ratio | connections the host held at the end | refused so far (host count) | host RSS MB before / quiet peak / attacked peak / 5 s / ${SETTLE_SECONDS} s after |`,
  )
  console.log('|---|---|---|---|---|---|---|---|---|')
  for (const row of rows) console.log(row)
  console.log(`\nmedian p99 ratio: ${median(ratios).toFixed(2)}`)
  // Why the host answered a request with an error of its own (its warnings say).
  for (const line of stdout.split('\n').filter((text) => text.includes('"level":40'))) log(`host: ${line.slice(0, 600)}`)
  // When the host collected the flood's garbage.
  for (const line of stdout.split('\n').filter((text) => text.includes('connection flood over'))) log(`host: ${line}`)
} finally {
  host.kill('SIGTERM')
  await new Promise((resolve) => host.once('exit', resolve))
  rmSync(dataDir, {recursive: true, force: true})
}
