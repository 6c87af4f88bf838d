// The data plane as an operator runs it (issue 35): `edgeworkers host serve` as its own process with
// its default settings but one shard (EDGEWORKERS_HOST__SHARDS=1, or more --env settings), serving
// fixtures/workers/hello, against the same script on a bare `workerd serve`. A separate closed-loop
// load generator (./load.ts, CONNECTIONS keep-alive connections) runs SECONDS against each in turn,
// ROUNDS interleaved rounds; for each run the CPU time per request of every process (the load
// generator, the host, its shard's workerd, the bare workerd) is read from /proc. Then p99 latency at
// the same offered load: an open loop at half of bare's median req/s against each, ROUNDS rounds.
// The Worker is deployed into the running host; the rounds start once the shard's settle swap put it
// on its own socket (host.loader_settle_seconds, 5 s here instead of the default's 300 s: the state
// the default reaches), or at once with --loaded (the loader's transient; no settle swap then).
// With --env EDGEWORKERS_HOST__FRONT=haproxy the host's HAProxy child (its front door) counts as the
// host: its CPU is added to the host's, and shown alone in brackets.
//
//   node --import tsx bench/host/operator.ts --seconds 5 --rounds 5 --connections 16 [--env KEY=VALUE …] [--node-option=--cpu-prof …]
//     [--restart-after-deploy | --loaded]
import {spawn} from 'node:child_process'
import {mkdtempSync, readdirSync, readFileSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {readHostInfo, type HostInfo} from '../../src/edge-host/host-info.js'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {HostClient, pairHost} from '../support/host.js'
import {log, machineLoad, median} from '../support/stats.js'
import {cpuMs, load, startBareWorkerdWith, type LoadResult} from './support.js'
import {EXTRA_ENV, HELLO, HOST_NODE_OPTIONS, MEASURE_LOADED, RESTART_AFTER_DEPLOY, ROUNDS, SECONDS, workDir} from './options.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** `host serve` on `dataDir` (fresh, or `paired` already), one shard unless --env says otherwise. */
async function startHostServe(dataDir: string, paired = false): Promise<{pid: number; info: HostInfo; stderr: () => string; stop(): Promise<void>}> {
  const extra = Object.fromEntries(EXTRA_ENV.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]))
  const child = spawn(
    process.execPath,
    [...HOST_NODE_OPTIONS, path.join(ROOT, 'bin/run.js'), 'host', 'serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'],
    {
      env: {
        ...process.env,
        EDGEWORKERS_LOG_FORMAT: 'json',
        EDGEWORKERS_CONFIG: undefined,
        EDGEWORKERS_DATA_DIR: undefined,
        EDGEWORKERS_HOST__SHARDS: '1',
        EDGEWORKERS_HOST__LOADER_SETTLE_SECONDS: MEASURE_LOADED ? '0' : '5',
        ...extra,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  for (let waited = 0; waited < 60_000; waited += 100) {
    const info = await readHostInfo(dataDir)
    if (info && (paired || stderr.includes('pairing code'))) {
      return {pid: child.pid!, info, stderr: () => stderr, stop: async () => void (child.kill('SIGTERM'), await exited)}
    }
    await sleep(100)
  }
  child.kill('SIGTERM')
  throw new Error(`host serve did not start: ${stderr}`)
}

/** The pid of the one running workerd of the host's shard. */
function shardPid(dataDir: string): number {
  const pids = readdirSync(path.join(dataDir, 'runtime', 'pids')).filter((file) => file.startsWith('shard-'))
  if (pids.length !== 1) throw new Error(`expected one running workerd, found ${pids.length}`)
  return Number(pids[0]!.slice(pids[0]!.lastIndexOf('.') + 1))
}

/** Waits for the shard's settle swap and its old process's exit (the Worker then has its own socket); false if not within `ms`. */
async function settled(adminUrl: string, ms: number): Promise<boolean> {
  for (let waited = 0; waited < ms; waited += 500) {
    const metrics = await (await fetch(`${adminUrl}/metrics`)).text()
    const processes = readdirSync(path.join(dataDir, 'runtime', 'pids')).filter((file) => file.startsWith('shard-')).length
    if (/edgeworkers_host_shard_swap_seconds_count\{reason="settle",mode="overlap"\} [1-9]/.test(metrics) && processes === 1) return true
    await sleep(500)
  }
  return false
}

/**
 * The host's CPU time: `host serve` and, with host.front = "haproxy" (--env EDGEWORKERS_HOST__FRONT=haproxy),
 * its HAProxy child (the host's front door; its share also alone).
 */
function hostCpuMs(hostPid: number): {all: number; front: number} {
  const children = readFileSync(`/proc/${hostPid}/task/${hostPid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number)
  const front = children.filter((pid) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'haproxy').reduce((sum, pid) => sum + cpuMs(pid), 0)
  return {all: cpuMs(hostPid) + front, front}
}

/** The requests HAProxy's fast path answered for `script` (counted by status class), from the host's metrics. */
async function fastPathRequests(adminUrl: string, script: string): Promise<number> {
  const metrics = await (await fetch(`${adminUrl}/metrics`)).text()
  const line = new RegExp(`^edgeworkers_host_requests_total\\{script="${script}",status="\\dxx"\\} (\\d+)`, 'gm')
  return [...metrics.matchAll(line)].reduce((sum, match) => sum + Number(match[1]), 0)
}

type Run = LoadResult & {hostUs: number; frontUs: number; workerdUs: number}
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-operator-'))
try {
  log(`# ${machineLoad()}`)
  const source = readFileSync(HELLO, 'utf8')
  let host = await startHostServe(dataDir)
  const name = scriptNameFor('bench/hello')
  try {
    const secret = await pairHost(host.info.adminUrl, /pairing code: (\S+)/.exec(host.stderr())![1]!)
    await new HostClient(host.info.adminUrl, secret).deploy(name, moduleUpload(source))
    if (RESTART_AFTER_DEPLOY) {
      await host.stop()
      host = await startHostServe(dataDir, true)
    } else if (!MEASURE_LOADED) log(`# settle swap: ${(await settled(host.info.adminUrl, 60_000)) ? 'done' : 'none within 60 s'}`)
    const bare = await startBareWorkerdWith([{name: 'hello', source}], 'bare')
    const targets = {
      bare: {url: `http://127.0.0.1:${bare.process.ports.get('hello')}/`, hop: null as number | null, workerd: () => bare.process.pid},
      host: {url: `${host.info.publicUrl}/${name}/`, hop: host.pid as number | null, workerd: () => shardPid(dataDir)},
    }
    const runs: Record<keyof typeof targets, Run[]> = {bare: [], host: []}
    for (const target of Object.values(targets)) await load(target.url, 1)
    // What the host and its shard spend with no request at all (timers, probes, the tail Worker's posts).
    const idleBefore = {host: hostCpuMs(host.pid).all, workerd: cpuMs(shardPid(dataDir)), at: performance.now()}
    await sleep(SECONDS * 1000)
    const idleSeconds = (performance.now() - idleBefore.at) / 1000
    const idle = {host: (hostCpuMs(host.pid).all - idleBefore.host) / idleSeconds, workerd: (cpuMs(shardPid(dataDir)) - idleBefore.workerd) / idleSeconds}
    const fastBefore = await fastPathRequests(host.info.adminUrl, name)
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [key, target] of Object.entries(targets) as Array<[keyof typeof targets, (typeof targets)['bare']]>) {
        const workerd = target.workerd()
        const hop = () => (target.hop === null ? {all: 0, front: 0} : hostCpuMs(target.hop))
        const before = {hop: hop(), workerd: cpuMs(workerd)}
        const result = await load(target.url, SECONDS)
        const perRequest = (ms: number) => (ms * 1000) / result.requests
        const after = hop()
        runs[key].push({
          ...result,
          hostUs: perRequest(after.all - before.hop.all),
          frontUs: perRequest(after.front - before.hop.front),
          workerdUs: perRequest(cpuMs(workerd) - before.workerd),
        })
      }
      log(`# round ${round}: bare ${runs.bare.at(-1)!.rps.toFixed(0)} req/s, host ${runs.host.at(-1)!.rps.toFixed(0)} req/s (${machineLoad()})`)
    }
    // p99 at the same offered load: an open loop at half of bare's capacity, against each in turn.
    const rate = Math.round(median(runs.bare.map((run) => run.rps)) / 2)
    const open: Record<keyof typeof targets, LoadResult[]> = {bare: [], host: []}
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [key, target] of Object.entries(targets) as Array<[keyof typeof targets, (typeof targets)['bare']]>)
        open[key].push(await load(target.url, SECONDS, rate))
      log(`# open loop round ${round} at ${rate} req/s: p99 bare ${open.bare.at(-1)!.p99Ms.toFixed(2)} ms, host ${open.host.at(-1)!.p99Ms.toFixed(2)} ms`)
    }
    const fastRequests = (await fastPathRequests(host.info.adminUrl, name)) - fastBefore
    // Bare workerd's CPU per request at the host's rate (an open loop at the host's median req/s): how much of the
    // host's workerd CPU/req ratio is only the lower rate its hop delivers requests at (fewer per wake-up).
    const hostRate = Math.round(median(runs.host.map((run) => run.rps)))
    const atHostRate: number[] = []
    for (let round = 1; round <= ROUNDS; round++) {
      const before = cpuMs(bare.process.pid)
      const result = await load(targets.bare.url, SECONDS, hostRate)
      atHostRate.push(((cpuMs(bare.process.pid) - before) * 1000) / result.requests)
    }
    await bare.process.stop()
    const m = (target: keyof typeof targets, field: keyof Run) => median(runs[target].map((run) => run[field] as number))
    const perRound = (of: (round: number) => number) => median(runs.bare.map((_, round) => of(round)))
    const row = (label: string, target: keyof typeof targets) =>
      `| ${label} | ${m(target, 'rps').toFixed(0)} | ${m(target, 'p50Ms').toFixed(2)} | ${m(target, 'p99Ms').toFixed(2)} | ${runs[target].reduce((sum, run) => sum + run.failures, 0)} | ${m(target, 'loadUs').toFixed(0)} | ${target === 'host' ? `${m(target, 'hostUs').toFixed(0)} (${m(target, 'frontUs').toFixed(0)})` : '–'} | ${m(target, 'workerdUs').toFixed(0)} |`
    console.log(
      [
        `${new Date().toISOString()}, ${machineLoad()}; ${ROUNDS} interleaved rounds of ${SECONDS} s, settings: one shard${RESTART_AFTER_DEPLOY ? ', host restarted after the deploy' : MEASURE_LOADED ? ', through the loader' : ', after the settle swap'}${EXTRA_ENV.map((pair) => `, ${pair}`).join('')}`,
        '',
        '| target | req/s | p50 ms | p99 ms | failed | load generator CPU µs/req | host CPU µs/req (of which HAProxy) | workerd CPU µs/req |',
        '|---|---|---|---|---|---|---|---|',
        row('bare `workerd serve`', 'bare'),
        row('`host serve`', 'host'),
        '',
        `Bare workerd at the host's ${hostRate} req/s (open loop, ${ROUNDS} rounds): ${median(atHostRate).toFixed(0)} µs CPU/req, ${(median(atHostRate) / m('bare', 'workerdUs')).toFixed(2)}× its closed-loop figure; the host's workerd ÷ it: ${(m('host', 'workerdUs') / median(atHostRate)).toFixed(2)}×.`,
        '',
        `Idle (no requests, ${SECONDS} s): host ${idle.host.toFixed(1)} ms CPU/s, its workerd ${idle.workerd.toFixed(1)} ms CPU/s. Requests HAProxy's fast path answered during the rounds: ${fastRequests}.`,
        '',
        `Per round, host ÷ bare (medians): req/s **${perRound((round) => runs.host[round]!.rps / runs.bare[round]!.rps).toFixed(2)}×**; ` +
          `workerd CPU/req ${perRound((round) => runs.host[round]!.workerdUs / runs.bare[round]!.workerdUs).toFixed(2)}×; ` +
          `host CPU/req ÷ bare workerd's ${perRound((round) => runs.host[round]!.hostUs / runs.bare[round]!.workerdUs).toFixed(2)}×`,
        '',
        `Open loop at ${rate} req/s (half of bare's median req/s), ${ROUNDS} interleaved rounds: p99 bare ${median(open.bare.map((run) => run.p99Ms)).toFixed(2)} ms, ` +
          `host ${median(open.host.map((run) => run.p99Ms)).toFixed(2)} ms (failed ${open.host.reduce((sum, run) => sum + run.failures, 0)}); ` +
          `host ÷ bare p99, median per round: **${median(open.host.map((run, round) => run.p99Ms / open.bare[round]!.p99Ms)).toFixed(2)}×**`,
      ].join('\n'),
    )
  } finally {
    await host.stop()
  }
} finally {
  rmSync(dataDir, {recursive: true, force: true})
  rmSync(workDir, {recursive: true, force: true})
}
