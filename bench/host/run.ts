// Edge host benchmark, all in one run:
//   1. requests/s and p50/p99 latency of fixtures/workers/hello through the host (data plane →
//      shard → script) against the same script on a bare workerd process (the baseline), and the ratio;
//   2. shard swap time (requests held while the shard's workerd is replaced) for a shard holding 1
//      and 64 scripts, and the whole upload → live time of a redeploy;
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
import {request} from 'undici'
import {startHost, type RunningHost} from '../../src/edge-host/host.js'
import {renderValidationConfig} from '../../src/edge-host/runtime/workerd-config.js'
import {WorkerdProcess} from '../../src/edge-host/runtime/workerd-process.js'
import {paths, type UploadScript} from '../../src/protocol/management-api.js'
import {signRequest} from '../../src/protocol/signing.js'

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
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

function upload(source: string): UploadScript {
  return {
    releaseGeneration: createHash('sha256').update(source).digest('hex').slice(0, 32),
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    builderPolicy: 'department-worker-project-v2.9',
    modules: [{name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')}],
  }
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
  }
  const config = renderValidationConfig(script, {modulePath: (digest) => digest, egressAllow: ['public']})
  writeFileSync(path.join(dir, 'config.capnp'), config.text)
  const outcome = await WorkerdProcess.start({configPath: path.join(dir, 'config.capnp'), sockets: config.sockets, cwd: dir, startTimeoutMs: 30_000})
  if (!outcome.ok) throw new Error(outcome.error)
  return {process: outcome.process, url: `http://127.0.0.1:${outcome.process.ports.get(script.name)}/`}
}

async function load(url: string, seconds: number): Promise<LoadResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', LOAD, url, String(CONNECTIONS), String(seconds)], {stdio: ['ignore', 'pipe', 'inherit']})
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  if (code !== 0) throw new Error(`load generator exited ${code}`)
  return JSON.parse(output) as LoadResult
}

/** Sum and count of the host's deploy swap-time histogram. */
async function swapHistogram(host: RunningHost): Promise<{sum: number; count: number}> {
  const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
  const value = (name: string) => Number(new RegExp(`^edgeworkers_host_shard_swap_seconds_${name}\\{reason="deploy"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0)
  return {sum: value('sum'), count: value('count')}
}

/** Redeploys one script `SWAPS` times; median held time and median upload → live time. */
async function measureSwaps(host: RunningHost, client: Client, name: string): Promise<{heldMs: number; deployMs: number}> {
  const held: number[] = []
  const total: number[] = []
  for (let round = 0; round < SWAPS; round++) {
    const before = await swapHistogram(host)
    const began = performance.now()
    await client.deploy(name, upload(`${variant(round)}// swap ${round} ${Date.now()}\n`))
    total.push(performance.now() - began)
    const after = await swapHistogram(host)
    held.push(((after.sum - before.sum) / (after.count - before.count)) * 1000)
  }
  return {heldMs: median(held), deployMs: median(total)}
}

/** Deploys scripts `from`…`to - 1` together (their restarts coalesce) and waits until all serve. */
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

  // 1. Throughput: through the host vs bare workerd, alternating rounds.
  const throughputHost = await startBenchHost(path.join(workDir, 'throughput'))
  const bare = await startBareWorkerd(helloSource)
  const hello = scriptName('bench/hello')
  await throughputHost.client.deploy(hello, upload(helloSource))
  const hostUrl = `${throughputHost.host.publicUrl}/${hello}/`
  const bareUrl = bare.url
  await load(bareUrl, 2)
  await load(hostUrl, 2)
  const runs: {bare: LoadResult[]; host: LoadResult[]} = {bare: [], host: []}
  for (let round = 0; round < ROUNDS; round++) {
    runs.bare.push(await load(bareUrl, SECONDS))
    runs.host.push(await load(hostUrl, SECONDS))
    console.error(`# round ${round + 1}: bare ${runs.bare.at(-1)!.rps.toFixed(0)} req/s, host ${runs.host.at(-1)!.rps.toFixed(0)} req/s`)
  }
  await bare.process.stop()
  await throughputHost.host.stop()
  const summary = (results: LoadResult[]) => ({
    rps: median(results.map((result) => result.rps)),
    p50Ms: median(results.map((result) => result.p50Ms)),
    p99Ms: median(results.map((result) => result.p99Ms)),
    failures: results.reduce((sum, result) => sum + result.failures, 0),
  })
  const bareSummary = summary(runs.bare)
  const hostSummary = summary(runs.host)

  // 2 and 3. Swap time at 1 and 64 scripts; memory at 0 and 100 scripts, on one shard.
  const {host, client} = await startBenchHost(path.join(workDir, 'swap'))
  const emptyShardRss = rssMiB(shardPid(host))
  const emptyHostRss = rssMiB(process.pid)
  await deployMany(client, 0, 1)
  const swapOne = await measureSwaps(host, client, scriptName('bench/0'))
  await deployMany(client, 1, 64)
  const swapSixtyFour = await measureSwaps(host, client, scriptName('bench/0'))
  await deployMany(client, 64, 100)
  for (let index = 0; index < 100; index++) await (await fetch(`${host.publicUrl}/${scriptName(`bench/${index}`)}/`)).text()
  const fullShardRss = rssMiB(shardPid(host))
  const fullHostRss = rssMiB(process.pid)
  await host.stop()

  const row = (label: string, result: ReturnType<typeof summary>) =>
    `| ${label} | ${result.rps.toFixed(0)} | ${result.p50Ms.toFixed(2)} | ${result.p99Ms.toFixed(2)} | ${result.failures} |`
  console.log(
    [
      `Throughput: hello, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s each (medians).`,
      '',
      '| target | req/s | p50 ms | p99 ms | failed |',
      '|---|---|---|---|---|',
      row('bare workerd (baseline)', bareSummary),
      row('through the edge host', hostSummary),
      '',
      `Ratio host / bare: **${(hostSummary.rps / bareSummary.rps).toFixed(2)}**`,
      '',
      `Shard swap (median of ${SWAPS} redeploys of one script):`,
      '',
      '| scripts in the shard | requests held (swap) ms | upload → live ms |',
      '|---|---|---|',
      `| 1 | ${swapOne.heldMs.toFixed(0)} | ${swapOne.deployMs.toFixed(0)} |`,
      `| 64 | ${swapSixtyFour.heldMs.toFixed(0)} | ${swapSixtyFour.deployMs.toFixed(0)} |`,
      '',
      'Resident memory, one shard, 0 → 100 scripts (each served once):',
      '',
      '| process | 0 scripts MiB | 100 scripts MiB | per 100 scripts MiB |',
      '|---|---|---|---|',
      `| shard workerd | ${emptyShardRss.toFixed(0)} | ${fullShardRss.toFixed(0)} | ${(fullShardRss - emptyShardRss).toFixed(0)} |`,
      `| host (node) | ${emptyHostRss.toFixed(0)} | ${fullHostRss.toFixed(0)} | ${(fullHostRss - emptyHostRss).toFixed(0)} |`,
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
