// Edge host benchmark, all in one run:
//   1. requests/s and p50/p99 latency of fixtures/workers/hello through the host (data plane →
//      shard → script) against the same script on a bare workerd process (the baseline), and the ratio;
//      beside them the other data-plane options, each in front of (or inside) a bare workerd: a plain
//      Node proxy (http server + undici dispatch, no logic), a raw node:http proxy (keep-alive agent,
//      piped bodies), and routing inside workerd (a router Worker calling the script through a
//      service binding, no Node hop). For each: the CPU time per request of the hop process (the
//      Node proxy; this process for the host) and of workerd, read from /proc over the same rounds.
//      The host runs in both code-loading modes: loader (the Worker runs in the shard's loader
//      Worker) and restart (the Worker has its own socket);
//   2. deploy time for a shard holding 1 and 64 scripts: loaded in place (host.code_loading =
//      loader), and both swap modes of the restart path (overlap: no script of the shard has Durable
//      Objects, nothing waits; hold: one has, requests wait for the swap), and the whole upload → live
//      time of a redeploy;
//   3. resident memory per 100 scripts (the shard's workerd, in both code-loading modes, and the host process);
//   4. what deploys of Worker A do to Worker B of the same shard (under the loader): B under sustained load (and holding
//      open WebSockets) during DEPLOYS redeploys of A, against B under the same load without deploys
//      right before: failed requests, requests slower than 4× the undisturbed p99, closed WebSockets;
//   5. a host holding WORKERS Workers (default shard count, under the loader): a redeploy of one until it serves, the
//      workerd memory against one bare workerd holding the same scripts, and a host restart until all
//      serve (each asked once) against that bare workerd's start until each served once.
//
//   node --import tsx bench/host/run.ts [--seconds 10] [--connections 32] [--rounds 3] [--swaps 5] [--deploys 100] [--workers 2000] [--sections plane,neighbours,many]
//
// The load generator (./load.ts) runs as its own process. Prints a Markdown summary for BENCHMARKS.md.
import {spawn} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import pino from 'pino'
import http from 'node:http'
import {Agent, request, WebSocket} from 'undici'
import {settingsSchema} from '../../src/config/schema.js'
import {startHost, type RunningHost} from '../../src/edge-host/host.js'
import {renderValidationConfig} from '../../src/workerd/config.js'
import {WorkerdProcess} from '../../src/workerd/process.js'
import {READINESS_WAIT_MAX_MS, type UploadScript} from '../../src/protocol/management-api.js'
import {paths} from '../../test/support/paths.js'
import {signRequest} from '../../src/protocol/signing.js'
import {machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({
  options: {
    seconds: {type: 'string', default: '10'},
    connections: {type: 'string', default: '32'},
    rounds: {type: 'string', default: '3'},
    swaps: {type: 'string', default: '5'},
    deploys: {type: 'string', default: '100'},
    workers: {type: 'string', default: '2000'},
    /** plane: throughput, deploy time, memory (1–3); neighbours: deploys of A against B (4); many: WORKERS Workers (5). */
    sections: {type: 'string', default: 'plane,neighbours,many'},
  },
})
const SECONDS = Number(options.seconds)
const CONNECTIONS = Number(options.connections)
const ROUNDS = Number(options.rounds)
const SWAPS = Number(options.swaps)
const DEPLOYS = Number(options.deploys)
const WORKERS = Number(options.workers)
const SECTIONS = new Set(options.sections.split(','))
const LOAD = fileURLToPath(new URL('./load.ts', import.meta.url))
const HELLO = fileURLToPath(new URL('../../fixtures/workers/hello/index.js', import.meta.url))
const COUNTER = fileURLToPath(new URL('../../fixtures/workers/counter/index.js', import.meta.url))
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-host-'))

interface LoadResult {
  requests: number
  seconds: number
  rps: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  failures: number
  slow: number
}

const scriptName = (label: string) => `dw-${createHash('sha256').update(label).digest('hex').slice(0, 48)}`

function upload(source: string, bindings: UploadScript['bindings'] = []): UploadScript {
  return {
    releaseGeneration: createHash('sha256').update(source).digest('hex').slice(0, 32),
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    builderPolicy: 'department-worker-project-v2.9',
    modules: [{name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')}],
    bindings,
  }
}

type SwapMode = 'hold' | 'overlap' | 'load'

/** The script whose redeploys are timed: plain in overlap and load mode, the counter (Durable Objects) in hold mode. */
function timedScript(mode: SwapMode, round: number): UploadScript {
  if (mode !== 'hold') return upload(`${variant(round)}// swap ${round} ${Date.now()}\n`)
  const source = `${readFileSync(COUNTER, 'utf8')}// swap ${round} ${Date.now()}\n`
  return upload(source, [{type: 'durable_object_namespace', name: 'COUNTER', className: 'Counter'}])
}

/** B of the disturbance measure: answers plain requests, echoes WebSocket messages. */
const ECHO_WORKER = `export default {
  fetch(request) {
    if (request.headers.get('upgrade') !== 'websocket') return new Response('B')
    const [client, server] = Object.values(new WebSocketPair())
    server.accept()
    server.addEventListener('message', (event) => server.send(event.data))
    return new Response(null, {status: 101, webSocket: client})
  },
}
`
const WEBSOCKETS = 10
const DEFAULT_SHARDS = settingsSchema.parse({data_dir: workDir, store: {url: ''}}).host.shards

/** A distinct small Worker per index, so every script is its own code. */
const variant = (index: number) => `export default { fetch() { return new Response('variant ${index}') } }\n`

class Client {
  constructor(
    private readonly host: RunningHost,
    private readonly secret: string,
  ) {}

  async call(method: 'GET' | 'PUT' | 'POST', target: string, body?: unknown): Promise<{status: number; json: any}> {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const headers = {...(payload ? {'content-type': 'application/json'} : {}), ...signRequest({secret: this.secret, method, target, body: payload})}
    const response = await request(`${this.host.adminUrl}${target}`, {method, headers, body: payload})
    return {status: response.statusCode, json: await response.body.json()}
  }

  async deploy(name: string, script: UploadScript): Promise<void> {
    const uploaded = await this.call('PUT', paths.script(name), script)
    if (uploaded.status !== 200) throw new Error(`upload answered ${uploaded.status}: ${JSON.stringify(uploaded.json)}`)
    // The probe waits for the swap (as the engine's readiness gate does); it answers 409 only after the wait.
    while ((await this.call('GET', paths.readinessProbe(name, script.releaseGeneration, READINESS_WAIT_MAX_MS))).status !== 200) await sleep(10)
  }
}

async function startBenchHost(
  dir: string,
  settings: {shards?: number; code_loading?: 'loader' | 'restart'} = {},
): Promise<{host: RunningHost; client: Client}> {
  const host = await startHost({
    dataDir: dir,
    settings: {listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', shards: 1, coalesce_window_ms: 20, ...settings},
    logger: pino({level: 'silent'}),
  })
  const response = await request(`${host.adminUrl}${paths.pair}`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({code: host.issuedPairingCode}),
  })
  const {secret} = (await response.body.json()) as {secret: string}
  return {host, client: new Client(host, secret)}
}

/** The hello Worker alone on a bare workerd, configured as the host would run it. */
async function startBareWorkerd(source: string): Promise<{process: WorkerdProcess; url: string}> {
  const bare = await startBareWorkerdWith([{name: 'hello', source}], 'bare')
  return {process: bare.process, url: `http://127.0.0.1:${bare.process.ports.get('hello')}/`}
}

/** Scripts on one bare workerd, configured as the host would run them, each on its own loopback port. */
async function startBareWorkerdWith(sources: Array<{name: string; source: string}>, label: string): Promise<{process: WorkerdProcess}> {
  const dir = path.join(workDir, label)
  mkdirSync(dir, {recursive: true})
  const scripts = sources.map(({name, source}) => {
    const sha256 = createHash('sha256').update(source).digest('hex')
    writeFileSync(path.join(dir, sha256), source)
    return {
      name,
      releaseGeneration: 'bench',
      mainModule: 'index.js',
      compatibilityDate: '2026-11-01',
      compatibilityFlags: [],
      modules: [{name: 'index.js', type: 'esModule' as const, sha256, size: source.length}],
      bindings: [],
      secrets: [],
      serviceAccounts: [],
      runtimeConfig: [],
      operationSettingsJson: null,
      crons: [],
    }
  })
  const config = renderValidationConfig(scripts, {
    modulePath: (digest) => digest,
    egressAllow: ['public'],
    serviceBindingAddress: 'unix:/nonexistent',
    socketAddress: () => '127.0.0.1:0',
  })
  writeFileSync(path.join(dir, 'config.capnp'), config.text)
  const outcome = await WorkerdProcess.start({configPath: path.join(dir, 'config.capnp'), sockets: config.sockets, cwd: dir, startTimeoutMs: 600_000})
  if (!outcome.ok) throw new Error(outcome.error)
  return {process: outcome.process}
}

/** The least a Node front proxy does: forward each request to `origin` and stream the answer back. */
async function startPlainProxy(origin: string): Promise<{url: string; close(): Promise<void>}> {
  const agent = new Agent({connections: 64})
  const server = http.createServer((incoming, outgoing) => {
    agent.dispatch(
      {origin, path: incoming.url!, method: 'GET', headers: incoming.rawHeaders},
      {
        onRequestStart: () => {},
        onResponseStart: (_controller, statusCode, headers) => outgoing.writeHead(statusCode, headers as http.OutgoingHttpHeaders),
        onResponseData: (_controller, chunk) => void outgoing.write(chunk),
        onResponseEnd: () => outgoing.end(),
        onResponseError: (_controller, error) => outgoing.destroy(error),
      },
    )
  })
  server.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const {port} = server.address() as {port: number}
  return {url: `http://127.0.0.1:${port}/`, close: async () => (server.close(), await agent.close())}
}

/** A Node hop on node:http alone: a keep-alive agent to `origin`, request and answer piped through. */
async function startNodeHttpProxy(origin: string): Promise<{url: string; close(): Promise<void>}> {
  const {hostname, port: upstreamPort} = new URL(origin)
  const agent = new http.Agent({keepAlive: true, maxSockets: 64})
  const server = http.createServer((incoming, outgoing) => {
    const upstream = http.request(
      {host: hostname, port: upstreamPort, path: incoming.url, method: incoming.method, headers: incoming.headers, agent},
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(outgoing)
      },
    )
    upstream.once('error', () => outgoing.destroy())
    incoming.pipe(upstream)
  })
  server.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const {port} = server.address() as {port: number}
  return {url: `http://127.0.0.1:${port}/`, close: async () => (server.close(), agent.destroy())}
}

/**
 * Routing inside workerd: one process, a router Worker on the socket that forwards `/<script>/…` to
 * that script's service binding (the script itself as in the host: hello, no network of its own).
 */
async function startRouterWorkerd(source: string): Promise<{process: WorkerdProcess; url: string}> {
  const dir = path.join(workDir, 'router')
  mkdirSync(dir, {recursive: true})
  writeFileSync(path.join(dir, 'hello.js'), source)
  writeFileSync(
    path.join(dir, 'router.js'),
    `export default {
  fetch(request, env) {
    const url = new URL(request.url)
    const slash = url.pathname.indexOf('/', 1)
    const target = env[url.pathname.slice(1, slash === -1 ? undefined : slash)]
    if (!target) return new Response('{"code":"worker_not_found"}', {status: 404})
    url.pathname = slash === -1 ? '/' : url.pathname.slice(slash)
    return target.fetch(new Request(url, request))
  },
}
`,
  )
  writeFileSync(
    path.join(dir, 'config.capnp'),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "router", worker = (modules = [(name = "router.js", esModule = embed "router.js")], compatibilityDate = "2026-11-01", bindings = [(name = "hello", service = "hello")])),
    (name = "hello", worker = (modules = [(name = "index.js", esModule = embed "hello.js")], compatibilityDate = "2026-11-01")),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "router")],
);
`,
  )
  const outcome = await WorkerdProcess.start({configPath: path.join(dir, 'config.capnp'), sockets: ['http'], cwd: dir, startTimeoutMs: 30_000})
  if (!outcome.ok) throw new Error(outcome.error)
  return {process: outcome.process, url: `http://127.0.0.1:${outcome.process.ports.get('http')}/hello/`}
}

const CLOCK_TICKS_PER_SECOND = 100

/** CPU time (user + system) a process has used so far, in ms; 'self' is this process. */
function cpuMs(pid: number | 'self'): number {
  if (pid === 'self') {
    const usage = process.cpuUsage()
    return (usage.user + usage.system) / 1000
  }
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  // utime and stime are fields 14 and 15 of /proc/<pid>/stat, 12 and 13 after the ") " split.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND
}

async function load(url: string, seconds: number): Promise<LoadResult> {
  return startLoad(url, seconds).result
}

/** The load generator on `url` for up to `seconds`; stop() ends it early. Requests over `slowMs` count as slow. */
function startLoad(url: string, seconds: number, slowMs = Infinity): {result: Promise<LoadResult>; stop(): void} {
  const args = [LOAD, url, String(CONNECTIONS), String(seconds), '', String(slowMs)]
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {stdio: ['ignore', 'pipe', 'inherit']})
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const result = new Promise<number | null>((resolve) => child.once('exit', resolve)).then((code) => {
    if (code !== 0) throw new Error(`load generator exited ${code}`)
    return JSON.parse(output) as LoadResult
  })
  return {result, stop: () => void child.kill('SIGTERM')}
}

/**
 * 4. B (an echo Worker) under load and holding WEBSOCKETS open WebSockets (reopened when closed),
 * first undisturbed, then while A of the same shard is redeployed DEPLOYS times.
 */
async function measureDisturbance(): Promise<{
  quiet: LoadResult
  disturbed: LoadResult
  slowMs: number
  closedSockets: number
  deploySeconds: number
  restarts: string[]
}> {
  const {host, client} = await startBenchHost(path.join(workDir, 'disturb'), {code_loading: 'loader'})
  const a = scriptName('bench/disturb/a')
  const b = scriptName('bench/disturb/b')
  await client.deploy(b, upload(ECHO_WORKER))
  await client.deploy(a, upload(variant(-1)))
  const bUrl = `${host.publicUrl}/${b}/`
  await load(bUrl, 2)
  const quiet = await load(bUrl, 10)
  const slowMs = 4 * quiet.p99Ms
  let closedSockets = 0
  let open = true
  const sockets = new Set<WebSocket>()
  const openSocket = () => {
    const socket = new WebSocket(bUrl.replace('http', 'ws'))
    sockets.add(socket)
    socket.addEventListener('close', () => {
      sockets.delete(socket)
      if (!open) return
      closedSockets++
      openSocket()
    })
  }
  for (let index = 0; index < WEBSOCKETS; index++) openSocket()
  await sleep(500)
  const disturbed = startLoad(bUrl, 3600, slowMs)
  const began = performance.now()
  for (let round = 0; round < DEPLOYS; round++) await client.deploy(a, upload(`${variant(round)}// deploy ${round}\n`))
  const deploySeconds = (performance.now() - began) / 1000
  disturbed.stop()
  open = false
  for (const socket of sockets) socket.close()
  // What replaced the shard's process, if anything did (a start is always there): the watchdog, a recycle, a crash.
  const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
  const restarts = metrics
    .split('\n')
    .filter((line) => /^edgeworkers_host_(shard_restarts_total|worker_incidents_total)\{/.test(line) && !line.includes('reason="start"'))
  await host.stop()
  return {quiet, disturbed: await disturbed.result, slowMs, closedSockets, deploySeconds, restarts}
}

/**
 * 5. WORKERS distinct Workers on a host with the default shard count: a redeploy of one until it
 * serves, workerd memory, and a restart until all serve; against one bare workerd holding them all.
 */
async function measureManyWorkers(): Promise<{
  redeployMs: number
  /** Of it, the in-place load (the host's swap histogram, mode load). */
  redeployLoadMs: number
  /** Bare workerd processes the baseline needed (1, or the shard count when one could not start them all), and why. */
  bareProcesses: number
  bareError: string | null
  hostWorkerdMiB: number
  bareMiB: number
  hostStartMs: number
  bareStartMs: number
  loadMs: number
  failed: Record<string, number>
  restarts: string[]
}> {
  const dir = path.join(workDir, 'many')
  let {host, client} = await startBenchHost(dir, {shards: DEFAULT_SHARDS, code_loading: 'loader'})
  const loadBegan = performance.now()
  // 25 uploads at a time: on a loaded machine 100 at once outwait the management listener's request timeout.
  for (let from = 0; from < WORKERS; from += 25) await deployMany(client, from, Math.min(WORKERS, from + 25))
  const loadMs = performance.now() - loadBegan
  /** Answers other than 200, by status, over every serveAll. */
  const failed: Record<string, number> = {}
  /** Asks every Worker once, CONNECTIONS at a time. */
  const serveAll = async (origin: (index: number) => string) => {
    let next = 0
    const worker = async () => {
      for (let index = next++; index < WORKERS; index = next++) {
        const response = await fetch(origin(index))
        if (response.status !== 200) failed[response.status] = (failed[response.status] ?? 0) + 1
        await response.text()
      }
    }
    await Promise.all(Array.from({length: CONNECTIONS}, worker))
  }
  await serveAll((index) => `${host.publicUrl}/${scriptName(`bench/${index}`)}/`)
  // Replaced processes of the last swaps may still be draining: read once each shard runs one.
  while (shardPids(host).length > DEFAULT_SHARDS) await sleep(100)
  const hostWorkerdMiB = shardPids(host).reduce((sum, pid) => sum + rssMiB(pid), 0)
  const redeploys: number[] = []
  const redeployLoads: number[] = []
  for (let round = 0; round < 3; round++) {
    const name = scriptName('bench/7')
    const before = await swapHistogram(host, 'load')
    const began = performance.now()
    await client.deploy(name, upload(`${variant(7)}// redeploy ${round}\n`))
    redeploys.push(performance.now() - began)
    redeployLoads.push(((await swapHistogram(host, 'load')).sum - before.sum) * 1000)
  }
  const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
  const restarts = metrics
    .split('\n')
    .filter((line) => /^edgeworkers_host_(shard_restarts_total|worker_incidents_total)\{/.test(line) && !line.includes('reason="start"'))
  await host.stop()
  const restartBegan = performance.now()
  ;({host, client} = await startBenchHost(dir, {shards: DEFAULT_SHARDS, code_loading: 'loader'}))
  await serveAll((index) => `${host.publicUrl}/${scriptName(`bench/${index}`)}/`)
  const hostStartMs = performance.now() - restartBegan
  await host.stop()

  const sources = Array.from({length: WORKERS}, (_, index) => ({name: `w${index}`, source: variant(index)}))
  // One bare workerd holding them all; where it cannot start them (at 2,000 small Workers V8 ran out
  // of heap here), as many bare processes as the host has shards, split as the host splits them.
  let bareError: string | null = null
  let bareProcesses = 1
  let bare = await startBareWorkerds([sources]).catch((error: unknown) => {
    bareError =
      String(error)
        .split('\n')
        .find((line) => /fatal|error/i.test(line)) ?? String(error).slice(0, 200)
    return null
  })
  if (!bare) {
    bareProcesses = DEFAULT_SHARDS
    bare = await startBareWorkerds(Array.from({length: DEFAULT_SHARDS}, (_, shard) => sources.filter((_, index) => index % DEFAULT_SHARDS === shard)))
  }
  await serveAll((index) => `http://127.0.0.1:${bare.port(`w${index}`)}/`)
  const bareStartMs = performance.now() - bare.began
  const bareMiB = bare.processes.reduce((sum, process) => sum + rssMiB(process.pid), 0)
  await Promise.all(bare.processes.map((process) => process.stop()))
  return {
    redeployMs: median(redeploys),
    redeployLoadMs: median(redeployLoads),
    hostWorkerdMiB,
    bareMiB,
    bareProcesses,
    bareError,
    hostStartMs,
    bareStartMs,
    loadMs,
    failed,
    restarts,
  }
}

/** Bare workerd processes, one per group of scripts, started together; `began`: when they were asked to start. */
async function startBareWorkerds(groups: Array<Array<{name: string; source: string}>>) {
  const began = performance.now()
  const processes = (await Promise.all(groups.map((group, index) => startBareWorkerdWith(group, `many-bare-${groups.length}-${index}`)))).map(
    (bare) => bare.process,
  )
  const port = (name: string) => processes.map((process) => process.ports.get(name)).find((port) => port !== undefined)
  return {began, processes, port}
}

/** Sum and count of the host's deploy swap-time histogram for one mode. */
async function swapHistogram(host: RunningHost, mode: SwapMode): Promise<{sum: number; count: number}> {
  const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
  const value = (name: string) =>
    Number(new RegExp(`^edgeworkers_host_shard_swap_seconds_${name}\\{reason="deploy",mode="${mode}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0)
  return {sum: value('sum'), count: value('count')}
}

/** Redeploys one script `SWAPS` times: median swap time (from the host's metrics) and upload → live time. */
async function measureSwaps(host: RunningHost, client: Client, name: string, mode: SwapMode): Promise<{swapMs: number; deployMs: number}> {
  const swaps: number[] = []
  const total: number[] = []
  for (let round = 0; round < SWAPS; round++) {
    const before = await swapHistogram(host, mode)
    const began = performance.now()
    await client.deploy(name, timedScript(mode, round))
    total.push(performance.now() - began)
    const after = await swapHistogram(host, mode)
    // A load counts each deploy's in-place load; one deploy may also find nothing new (a coalesced one).
    if (after.count < before.count + 1) throw new Error(`expected a ${mode} swap, saw ${after.count - before.count}`)
    swaps.push((after.sum - before.sum) * 1000)
  }
  return {swapMs: median(swaps), deployMs: median(total)}
}

/** Deploys variants `from`…`to - 1` together (their restarts coalesce) and waits until all serve. */
async function deployMany(client: Client, from: number, to: number): Promise<void> {
  const batch = Array.from({length: to - from}, (_, offset) => ({name: scriptName(`bench/${from + offset}`), script: upload(variant(from + offset))}))
  await Promise.all(batch.map(({name, script}) => client.deploy(name, script)))
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) / 1024
}

/** The pids of the running workerd of every shard (recorded as runtime/pids/shard-<i>.<pid>; one each outside swaps). */
function shardPids(host: RunningHost): number[] {
  return readdirSync(path.join(host.dataDir, 'runtime', 'pids'))
    .filter((file) => file.startsWith('shard-'))
    .map((file) => Number(file.slice(file.lastIndexOf('.') + 1)))
}

function shardPid(host: RunningHost): number {
  const pids = shardPids(host)
  if (pids.length !== 1) throw new Error(`expected one running workerd, found ${pids.length}`)
  return pids[0]!
}

async function main(): Promise<void> {
  const helloSource = readFileSync(HELLO, 'utf8')
  console.error(`# ${machineLoad()}`)
  if (SECTIONS.has('plane')) {
    // 1. Throughput and CPU: bare workerd, the other hops in front of (or inside) one, and the host, in
    //    interleaved rounds. `hop`: the process doing the routing besides workerd (none for bare/router).
    const throughputHost = await startBenchHost(path.join(workDir, 'throughput'), {code_loading: 'loader'})
    const restartHost = await startBenchHost(path.join(workDir, 'throughput-restart'), {code_loading: 'restart'})
    const bare = await startBareWorkerd(helloSource)
    const router = await startRouterWorkerd(helloSource)
    const hello = scriptName('bench/hello')
    await throughputHost.client.deploy(hello, upload(helloSource))
    await restartHost.client.deploy(hello, upload(helloSource))
    const plain = await startPlainProxy(new URL(bare.url).origin)
    const nodeHttp = await startNodeHttpProxy(new URL(bare.url).origin)
    type Target = 'bare' | 'plain' | 'nodeHttp' | 'router' | 'host' | 'hostRestart'
    const targets: Record<Target, {url: string; hop: 'self' | null; workerd: () => number}> = {
      bare: {url: bare.url, hop: null, workerd: () => bare.process.pid},
      plain: {url: plain.url, hop: 'self', workerd: () => bare.process.pid},
      nodeHttp: {url: nodeHttp.url, hop: 'self', workerd: () => bare.process.pid},
      router: {url: router.url, hop: null, workerd: () => router.process.pid},
      host: {url: `${throughputHost.host.publicUrl}/${hello}/`, hop: 'self', workerd: () => shardPid(throughputHost.host)},
      hostRestart: {url: `${restartHost.host.publicUrl}/${hello}/`, hop: 'self', workerd: () => shardPid(restartHost.host)},
    }
    const names = Object.keys(targets) as Target[]
    for (const target of names) await load(targets[target].url, 2)
    const runs = Object.fromEntries(names.map((target) => [target, [] as Array<LoadResult & {hopCpuMs: number; workerdCpuMs: number}>])) as Record<
      Target,
      Array<LoadResult & {hopCpuMs: number; workerdCpuMs: number}>
    >
    for (let round = 0; round < ROUNDS; round++) {
      // Interleaved, so a change in the machine's other load hits all of them alike.
      for (const target of names) {
        const {url, hop, workerd} = targets[target]
        const pid = workerd()
        const before = {hop: hop ? cpuMs(hop) : 0, workerd: cpuMs(pid)}
        const result = await load(url, SECONDS)
        runs[target].push({...result, hopCpuMs: hop ? cpuMs(hop) - before.hop : 0, workerdCpuMs: cpuMs(pid) - before.workerd})
      }
      console.error(`# round ${round + 1}: ${names.map((target) => `${target} ${runs[target].at(-1)!.rps.toFixed(0)} req/s`).join(', ')} (${machineLoad()})`)
    }
    await plain.close()
    await nodeHttp.close()
    await bare.process.stop()
    await router.process.stop()
    await throughputHost.host.stop()
    await restartHost.host.stop()
    const summary = (results: Array<LoadResult & {hopCpuMs: number; workerdCpuMs: number}>) => ({
      rps: median(results.map((result) => result.rps)),
      p50Ms: median(results.map((result) => result.p50Ms)),
      p99Ms: median(results.map((result) => result.p99Ms)),
      failures: results.reduce((sum, result) => sum + result.failures, 0),
      hopUsPerRequest: median(results.map((result) => (result.hopCpuMs * 1000) / result.requests)),
      workerdUsPerRequest: median(results.map((result) => (result.workerdCpuMs * 1000) / result.requests)),
    })
    /** Median over rounds of the per-round ratio to the bare baseline. */
    const ratioToBare = (results: LoadResult[]) => median(results.map((result, round) => result.rps / runs.bare[round]!.rps))
    /** The hop's CPU per request over the bare workerd's CPU per request for the same Worker. */
    const hopCpuRatio = (target: Target) => summary(runs[target]).hopUsPerRequest / summary(runs.bare).workerdUsPerRequest

    // 2 and 3. Deploy time at 1 and 64 scripts in each mode; memory at 0 and 100 scripts, on one shard.
    const swaps: Array<{mode: SwapMode; scripts: number; swapMs: number; deployMs: number}> = []
    const memory: Array<{mode: SwapMode; emptyMiB: number; fullMiB: number}> = []
    let fullHostRss = 0
    for (const mode of ['load', 'overlap', 'hold'] as const) {
      const {host, client} = await startBenchHost(path.join(workDir, `swap-${mode}`), {code_loading: mode === 'load' ? 'loader' : 'restart'})
      const timed = scriptName(`bench/timed-${mode}`)
      const emptyMiB = rssMiB(shardPid(host))
      await client.deploy(timed, timedScript(mode, -1))
      swaps.push({mode, scripts: 1, ...(await measureSwaps(host, client, timed, mode))})
      await deployMany(client, 1, 64)
      swaps.push({mode, scripts: 64, ...(await measureSwaps(host, client, timed, mode))})
      if (mode !== 'hold') {
        await deployMany(client, 64, 100)
        for (let index = 1; index < 100; index++) await (await fetch(`${host.publicUrl}/${scriptName(`bench/${index}`)}/`)).text()
        await (await fetch(`${host.publicUrl}/${timed}/`)).text()
        // A recycle or the last swaps' replaced processes may still be running: read once one runs.
        while (shardPids(host).length > 1) await sleep(100)
        memory.push({mode, emptyMiB, fullMiB: rssMiB(shardPid(host))})
        fullHostRss = rssMiB(process.pid)
      }
      await host.stop()
    }

    const row = (label: string, target: Target) => {
      const result = summary(runs[target])
      const hop = targets[target].hop ? result.hopUsPerRequest.toFixed(0) : '–'
      return `| ${label} | ${result.rps.toFixed(0)} | ${result.p50Ms.toFixed(2)} | ${result.p99Ms.toFixed(2)} | ${result.failures} | ${ratioToBare(runs[target]).toFixed(2)} | ${hop} | ${result.workerdUsPerRequest.toFixed(0)} |`
    }
    console.log(
      [
        `${new Date().toISOString()}, ${machineLoad()}`,
        '',
        `Throughput: hello, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s each (medians). CPU µs per request: the hop process (Node), and workerd.`,
        '',
        '| target | req/s | p50 ms | p99 ms | failed | ratio to bare | hop CPU µs/req | workerd CPU µs/req |',
        '|---|---|---|---|---|---|---|---|',
        row('bare workerd (baseline)', 'bare'),
        row('plain Node proxy (undici dispatch) → bare workerd', 'plain'),
        row('raw node:http proxy (keep-alive agent, pipe) → bare workerd', 'nodeHttp'),
        row('router Worker → service binding, inside one workerd', 'router'),
        row('through the edge host (code_loading = loader)', 'host'),
        row('through the edge host (code_loading = restart)', 'hostRestart'),
        '',
        `Aim: host req/s ≥ 0.8× bare — measured **${ratioToBare(runs.host).toFixed(2)}×** with the loader, ${ratioToBare(runs.hostRestart).toFixed(2)}× with restart (median of per-round ratios).`,
        `Aim: host CPU per request ≤ 0.5× workerd's for that Worker — measured **${hopCpuRatio('host').toFixed(2)}×** with the loader, ${hopCpuRatio('hostRestart').toFixed(2)}× with restart (plain proxy ${hopCpuRatio('plain').toFixed(2)}×, node:http ${hopCpuRatio('nodeHttp').toFixed(2)}×; the router Worker costs ${(summary(runs.router).workerdUsPerRequest / summary(runs.bare).workerdUsPerRequest).toFixed(2)}× bare workerd's CPU in workerd itself).`,
        '',
        `Deploy into a shard (median of ${SWAPS} redeploys of one script; load: loaded into the running process; requests wait for the swap only in hold mode):`,
        '',
        '| mode | scripts in the shard | load or swap ms | upload → live ms |',
        '|---|---|---|---|',
        ...swaps.map((swap) => `| ${swap.mode} | ${swap.scripts} | ${swap.swapMs.toFixed(0)} | ${swap.deployMs.toFixed(0)} |`),
        '',
        "Resident memory of the shard's workerd, 0 → 100 scripts (each served once):",
        '',
        '| code loading | 0 scripts MiB | 100 scripts MiB | per 100 scripts MiB |',
        '|---|---|---|---|',
        ...memory.map(
          (entry) =>
            `| ${entry.mode === 'load' ? 'loader' : 'restart'} | ${entry.emptyMiB.toFixed(0)} | ${entry.fullMiB.toFixed(0)} | ${(entry.fullMiB - entry.emptyMiB).toFixed(0)} |`,
        ),
        '',
        `The host process itself (node, state and proxy) held ${fullHostRss.toFixed(0)} MiB with 100 scripts; it does not grow per script beyond its GC noise.`,
      ].join('\n'),
    )
  }
  // Each section prints as soon as it is measured: a long run that is cut short keeps what it had.
  if (SECTIONS.has('neighbours')) {
    const disturbance = await measureDisturbance()
    console.log(
      [
        '',
        `${new Date().toISOString()}, ${machineLoad()}`,
        '',
        `Deploys of A vs B of the same shard (code_loading = loader): ${DEPLOYS} redeploys of A in ${disturbance.deploySeconds.toFixed(1)} s, B under ${CONNECTIONS} connections of load and ${WEBSOCKETS} open WebSockets (reopened when closed):`,
        '',
        `| B | requests | failed | slower than 4× undisturbed p99 (${disturbance.slowMs.toFixed(0)} ms) | p99 ms | max ms |`,
        '|---|---|---|---|---|---|',
        `| undisturbed (before) | ${disturbance.quiet.requests} | ${disturbance.quiet.failures} | – | ${disturbance.quiet.p99Ms.toFixed(1)} | ${disturbance.quiet.maxMs.toFixed(0)} |`,
        `| during the deploys of A | ${disturbance.disturbed.requests} | ${disturbance.disturbed.failures} | ${disturbance.disturbed.slow} | ${disturbance.disturbed.p99Ms.toFixed(1)} | ${disturbance.disturbed.maxMs.toFixed(0)} |`,
        '',
        `Aim: 0 failed or delayed requests and 0 closed WebSockets on B — measured **${disturbance.disturbed.failures} failed, ${disturbance.disturbed.slow} delayed, ${disturbance.closedSockets} WebSockets closed**.`,
        `Process restarts and incidents during the run: ${disturbance.restarts.length === 0 ? 'none' : disturbance.restarts.map((line) => `\`${line}\``).join(', ')}.`,
      ].join('\n'),
    )
  }
  if (SECTIONS.has('many')) {
    const many = await measureManyWorkers()
    console.log(
      [
        '',
        `${new Date().toISOString()}, ${machineLoad()}`,
        '',
        `${WORKERS} Workers on ${DEFAULT_SHARDS} shards (loaded in batches of 25 in ${(many.loadMs / 1000).toFixed(0)} s):`,
        '',
        many.bareError === null
          ? '| measure | host | one bare workerd, same scripts | ratio |'
          : `| measure | host | ${many.bareProcesses} bare workerd, same scripts split as the host splits them (one could not start them: ${many.bareError.replaceAll('|', '/')}) | ratio |`,
        '|---|---|---|---|',
        `| workerd resident memory, every script served once, MiB | ${many.hostWorkerdMiB.toFixed(0)} | ${many.bareMiB.toFixed(0)} | ${(many.hostWorkerdMiB / many.bareMiB).toFixed(2)} |`,
        `| start until each served once, ms (host: a restart of it) | ${many.hostStartMs.toFixed(0)} | ${many.bareStartMs.toFixed(0)} | ${(many.hostStartMs / many.bareStartMs).toFixed(2)} |`,
        '',
        `Answers other than 200 while asking each Worker once: ${JSON.stringify(many.failed)}; restarts and incidents before the host restart: ${many.restarts.join(', ') || 'none'}.`,
        `Aim: deploy of one → serving ≤ 250 ms — measured **${many.redeployMs.toFixed(0)} ms** (median of 3 redeploys, upload → live; of it the in-place load ${many.redeployLoadMs.toFixed(0)} ms, the rest mostly the validation sandbox). Aim: memory ≤ 1.3× bare — measured **${(many.hostWorkerdMiB / many.bareMiB).toFixed(2)}×**.`,
      ].join('\n'),
    )
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

try {
  await main()
} finally {
  rmSync(workDir, {recursive: true, force: true})
}
