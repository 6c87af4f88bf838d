// Edge host benchmark, all in one run:
//   1. requests/s and p50/p99 latency of fixtures/workers/hello through the host (data plane →
//      shard → script) against the same script on a bare workerd process (the baseline), and the ratio;
//      plus a plain Node proxy (http server + undici, no logic) in front of the bare workerd: the
//      floor of any Node front proxy on this machine, so the host's own cost can be told apart;
//   2. shard swap time for a shard holding 1 and 64 scripts, in both swap modes (overlap: no script
//      of the shard has Durable Objects, nothing waits; hold: one has, requests wait for the swap),
//      and the whole upload → live time of a redeploy;
//   3. resident memory per 100 scripts (the shard's workerd, and the host process).
//
//   node --import tsx bench/host/run.ts [--seconds 10] [--connections 32] [--rounds 3] [--swaps 5]
//
// The load generator (./load.ts) runs as its own process. Prints a Markdown summary for BENCHMARKS.md.
import {spawn} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import pino from 'pino'
import http from 'node:http'
import {Agent, request} from 'undici'
import {startHost, type RunningHost} from '../../src/edge-host/host.js'
import {renderValidationConfig} from '../../src/edge-host/runtime/workerd-config.js'
import {WorkerdProcess} from '../../src/edge-host/runtime/workerd-process.js'
import {paths, type UploadScript} from '../../src/protocol/management-api.js'
import {signRequest} from '../../src/protocol/signing.js'
import {median} from '../support/stats.js'

const {values: options} = parseArgs({
  options: {
    seconds: {type: 'string', default: '10'},
    connections: {type: 'string', default: '32'},
    rounds: {type: 'string', default: '3'},
    swaps: {type: 'string', default: '5'},
  },
})
const SECONDS = Number(options.seconds)
const CONNECTIONS = Number(options.connections)
const ROUNDS = Number(options.rounds)
const SWAPS = Number(options.swaps)
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
  failures: number
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

type SwapMode = 'hold' | 'overlap'

/** The script whose redeploys are timed: plain in overlap mode, the counter (Durable Objects) in hold mode. */
function timedScript(mode: SwapMode, round: number): UploadScript {
  if (mode === 'overlap') return upload(`${variant(round)}// swap ${round} ${Date.now()}\n`)
  const source = `${readFileSync(COUNTER, 'utf8')}// swap ${round} ${Date.now()}\n`
  return upload(source, [{type: 'durable_object_namespace', name: 'COUNTER', className: 'Counter'}])
}

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
    while ((await this.call('GET', paths.readinessProbe(name, script.releaseGeneration))).status !== 200) await sleep(10)
  }
}

async function startBenchHost(dir: string): Promise<{host: RunningHost; client: Client}> {
  const host = await startHost({
    dataDir: dir,
    settings: {listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', shards: 1, coalesce_window_ms: 20},
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
  const dir = path.join(workDir, 'bare')
  mkdirSync(dir, {recursive: true})
  const sha256 = createHash('sha256').update(source).digest('hex')
  writeFileSync(path.join(dir, sha256), source)
  const script = {
    name: 'hello',
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
  }
  const config = renderValidationConfig([script], {modulePath: (digest) => digest, egressAllow: ['public'], serviceBindingAddress: 'unix:/nonexistent', socketAddress: () => '127.0.0.1:0'})
  writeFileSync(path.join(dir, 'config.capnp'), config.text)
  const outcome = await WorkerdProcess.start({configPath: path.join(dir, 'config.capnp'), sockets: config.sockets, cwd: dir, startTimeoutMs: 30_000})
  if (!outcome.ok) throw new Error(outcome.error)
  return {process: outcome.process, url: `http://127.0.0.1:${outcome.process.ports.get(script.name)}/`}
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

async function load(url: string, seconds: number): Promise<LoadResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', LOAD, url, String(CONNECTIONS), String(seconds)], {stdio: ['ignore', 'pipe', 'inherit']})
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  if (code !== 0) throw new Error(`load generator exited ${code}`)
  return JSON.parse(output) as LoadResult
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
    if (after.count !== before.count + 1) throw new Error(`expected one ${mode} swap, saw ${after.count - before.count}`)
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

const shardPid = (host: RunningHost) => Number(readFileSync(path.join(host.dataDir, 'runtime', 'shard-0.pid'), 'utf8'))

async function main(): Promise<void> {
  const helloSource = readFileSync(HELLO, 'utf8')
  console.error(`# ${os.cpus().length} CPUs, load average ${os.loadavg().map((value) => value.toFixed(1)).join(' ')}`)

  // 1. Throughput: bare workerd, a plain proxy in front of it, and the host, in interleaved rounds.
  const throughputHost = await startBenchHost(path.join(workDir, 'throughput'))
  const bare = await startBareWorkerd(helloSource)
  const hello = scriptName('bench/hello')
  await throughputHost.client.deploy(hello, upload(helloSource))
  const plain = await startPlainProxy(new URL(bare.url).origin)
  const targets = {bare: bare.url, plain: plain.url, host: `${throughputHost.host.publicUrl}/${hello}/`}
  for (const url of Object.values(targets)) await load(url, 2)
  const runs: Record<keyof typeof targets, LoadResult[]> = {bare: [], plain: [], host: []}
  for (let round = 0; round < ROUNDS; round++) {
    // Interleaved, so a change in the machine's other load hits all three alike.
    for (const [target, url] of Object.entries(targets) as Array<[keyof typeof targets, string]>) runs[target].push(await load(url, SECONDS))
    console.error(`# round ${round + 1}: ${Object.keys(targets).map((target) => `${target} ${runs[target as keyof typeof targets].at(-1)!.rps.toFixed(0)} req/s`).join(', ')}`)
  }
  await plain.close()
  await bare.process.stop()
  await throughputHost.host.stop()
  const summary = (results: LoadResult[]) => ({
    rps: median(results.map((result) => result.rps)),
    p50Ms: median(results.map((result) => result.p50Ms)),
    p99Ms: median(results.map((result) => result.p99Ms)),
    failures: results.reduce((sum, result) => sum + result.failures, 0),
  })
  /** Median over rounds of the per-round ratio to the bare baseline. */
  const ratioToBare = (results: LoadResult[]) => median(results.map((result, round) => result.rps / runs.bare[round]!.rps))

  // 2 and 3. Swap time at 1 and 64 scripts in each mode; memory at 0 and 100 scripts, on one shard.
  const swaps: Array<{mode: SwapMode; scripts: number; swapMs: number; deployMs: number}> = []
  let emptyShardRss = 0
  let fullShardRss = 0
  let fullHostRss = 0
  for (const mode of ['overlap', 'hold'] as const) {
    const {host, client} = await startBenchHost(path.join(workDir, `swap-${mode}`))
    const timed = scriptName(`bench/timed-${mode}`)
    if (mode === 'overlap') {
      emptyShardRss = rssMiB(shardPid(host))
    }
    await client.deploy(timed, timedScript(mode, -1))
    swaps.push({mode, scripts: 1, ...(await measureSwaps(host, client, timed, mode))})
    await deployMany(client, 1, 64)
    swaps.push({mode, scripts: 64, ...(await measureSwaps(host, client, timed, mode))})
    if (mode === 'overlap') {
      await deployMany(client, 64, 100)
      for (let index = 1; index < 100; index++) await (await fetch(`${host.publicUrl}/${scriptName(`bench/${index}`)}/`)).text()
      await (await fetch(`${host.publicUrl}/${timed}/`)).text()
      fullShardRss = rssMiB(shardPid(host))
      fullHostRss = rssMiB(process.pid)
    }
    await host.stop()
  }

  const row = (label: string, result: ReturnType<typeof summary>, ratio: number) =>
    `| ${label} | ${result.rps.toFixed(0)} | ${result.p50Ms.toFixed(2)} | ${result.p99Ms.toFixed(2)} | ${result.failures} | ${ratio.toFixed(2)} |`
  console.log(
    [
      `Throughput: hello, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s each (medians).`,
      '',
      '| target | req/s | p50 ms | p99 ms | failed | ratio to bare |',
      '|---|---|---|---|---|---|',
      row('bare workerd (baseline)', summary(runs.bare), 1),
      row('plain Node proxy → bare workerd (floor)', summary(runs.plain), ratioToBare(runs.plain)),
      row('through the edge host', summary(runs.host), ratioToBare(runs.host)),
      '',
      `Ratio host / bare (median of per-round ratios): **${ratioToBare(runs.host).toFixed(2)}**`,
      '',
      `Shard swap (median of ${SWAPS} redeploys of one script; requests wait for the swap only in hold mode):`,
      '',
      '| mode | scripts in the shard | swap ms | upload → live ms |',
      '|---|---|---|---|',
      ...swaps.map((swap) => `| ${swap.mode} | ${swap.scripts} | ${swap.swapMs.toFixed(0)} | ${swap.deployMs.toFixed(0)} |`),
      '',
      'Resident memory of the shard\'s workerd, 0 → 100 scripts (each served once):',
      '',
      '| 0 scripts MiB | 100 scripts MiB | per 100 scripts MiB |',
      '|---|---|---|',
      `| ${emptyShardRss.toFixed(0)} | ${fullShardRss.toFixed(0)} | ${(fullShardRss - emptyShardRss).toFixed(0)} |`,
      '',
      `The host process itself (node, state and proxy) held ${fullHostRss.toFixed(0)} MiB with 100 scripts; it does not grow per script beyond its GC noise.`,
    ].join('\n'),
  )
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

try {
  await main()
} finally {
  rmSync(workDir, {recursive: true, force: true})
}
