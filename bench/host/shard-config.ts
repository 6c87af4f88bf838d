// What the host's shard config costs workerd per request (issue 35), against the same Worker in a
// bare workerd: the hello Worker rendered as a shard renders it (../../src/workerd/config.ts
// renderShardConfig: the health Worker, the egress network, the loader Worker and workerd's
// `--experimental` under host.code_loading = "loader", the tail Worker under host.worker_events),
// one part at a time, each in its own workerd on a loopback port, interleaved per round, CPU time
// per request from /proc. The host's own listeners the loader and the tail Worker reach are served
// here (the tail listener as when nobody tails). Beside them, the ways a Worker's events could be
// had: an empty tail Worker (workerd's trace and tail invocation alone), a streaming tail Worker,
// the counting main module (../../src/workerd/worker-counts.ts); and bare workerd at a lower request
// rate, as a host hop slower than bare workerd delivers it.
//
//   node --import tsx bench/host/shard-config.ts --seconds 4 --rounds 5 --connections 16
import {mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import {settingsSchema} from '../../src/config/schema.js'
import {createCodeServer} from '../../src/edge-host/runtime/code-server.js'
import {capnpString} from '../../src/workerd/capnp.js'
import {renderShardConfig, renderValidationConfig} from '../../src/workerd/config.js'
import {WorkerdProcess} from '../../src/workerd/process.js'
import {log, machineLoad, median} from '../support/stats.js'
import {HELLO, ROUNDS, SECONDS, workDir} from './options.js'
import {benchScript, cpuMs, load, type LoadResult} from './support.js'

const source = readFileSync(HELLO, 'utf8')
const hello = benchScript('hello', source, workDir)
const MAX_EVENTS_PER_SECOND = settingsSchema.parse({data_dir: '/nonexistent'}).host.tail_max_events_per_second

const listen = (server: http.Server, socket: string) => new Promise<void>((resolve) => server.listen(socket, resolve))
const codeSocket = path.join(workDir, 'code.sock')
const sinkSocket = path.join(workDir, 'sink.sock')
const codeServer = createCodeServer(
  () => undefined,
  () => Buffer.from(''),
)
// The host's tail listener when nobody tails: it takes the counters and asks for no trace.
let posts = 0
const sinkServer = http.createServer((request, response) => {
  posts++
  request
    .resume()
    .once('end', () =>
      response.writeHead(200, {'content-type': 'application/json'}).end(JSON.stringify({forward: [], maxEventsPerSecond: MAX_EVENTS_PER_SECOND})),
    )
})
await Promise.all([listen(codeServer, codeSocket), listen(sinkServer, sinkSocket)])

const renderOptions = (dir: string) => ({
  modulePath: (digest: string) => path.join('..', digest),
  egressAllow: ['public'],
  serviceBindingAddress: 'unix:/nonexistent',
  // The Worker on a loopback port (the load generator's), the shard's other sockets where the host puts them.
  socketAddress: (service: string) => (service === 'hello' ? '127.0.0.1:0' : `unix:${path.join(dir, `${service}.sock`)}`),
})

interface Variant {
  config: (dir: string) => {text: string; sockets: string[]}
  experimental: boolean
  /** An open loop at this share of the baseline's req/s in the same round, instead of the closed loop. */
  rateShare?: number
}

const shard = (options: {tail: boolean; loader: boolean; traced?: boolean}) => (dir: string) =>
  renderShardConfig([hello], {
    ...renderOptions(dir),
    durableObjectRoot: () => dir,
    tailSinkAddress: options.tail ? `unix:${sinkSocket}` : null,
    traced: () => options.traced ?? true,
    loaderCodeAddress: options.loader ? `unix:${codeSocket}` : null,
    experimental: false,
  })

/** The hello Worker and `services` beside it, `fields` added to its worker config. */
const custom =
  (fields: string, services: string[] = [], modules: string[] = []) =>
  (dir: string) => {
    const base = renderValidationConfig([hello], renderOptions(dir))
    const text = base.text
      .replace('globalOutbound = "egress"', `globalOutbound = "egress"${fields}`)
      .replace('modules = [(name = "index.js"', `modules = [${modules.map((module) => `${module}, `).join('')}(name = "index.js"`)
      .replace('services = [\n', `services = [\n    ${services.map((service) => `${service},\n    `).join('')}`)
    return {text, sockets: base.sockets}
  }
const EMPTY_TAIL = `(name = "tail", worker = (modules = [(name = "tail.js", esModule = "export default { tail() {} }")], compatibilityDate = "2025-01-01"))`
const STREAMING_TAIL = `(name = "tail", worker = (modules = [(name = "tail.js", esModule = ${capnpString(
  'let outcomes = {}; export default { tailStream() { return (event) => { if (event.event.type === "outcome") outcomes[event.event.outcome] = (outcomes[event.event.outcome] ?? 0) + 1 } } }',
)})], compatibilityDate = "2025-01-01"))`
const COUNTING_MAIN = `(name = "counting.js", esModule = ${capnpString(`import * as main from "index.js";
const handler = main.default;
let outcomes = {}, exceptions = 0, lastError = null;
function failed(error) { exceptions++; outcomes.exception = (outcomes.exception ?? 0) + 1; lastError = String(error?.name) + ": " + String(error?.message); }
function track(call) {
  let result;
  try { result = call(); } catch (error) { failed(error); throw error; }
  if (result && typeof result.then === "function") return result.then((value) => { outcomes.ok = (outcomes.ok ?? 0) + 1; return value; }, (error) => { failed(error); throw error; });
  outcomes.ok = (outcomes.ok ?? 0) + 1;
  return result;
}
export default { fetch(request, env, ctx) { return track(() => handler.fetch(request, env, ctx)); } };
export * from "index.js";`)})`

const variants: Record<string, Variant> = {
  'bare workerd (baseline)': {config: (dir) => renderValidationConfig([hello], renderOptions(dir)), experimental: false},
  'bare, `--experimental`': {config: (dir) => renderValidationConfig([hello], renderOptions(dir)), experimental: true},
  'shard config, no loader, no tail Worker': {config: shard({tail: false, loader: false}), experimental: false},
  'shard config, loader (`--experimental`), no tail Worker': {config: shard({tail: false, loader: true}), experimental: true},
  'shard config, no loader, tail Worker': {config: shard({tail: true, loader: false}), experimental: false},
  'shard config, loader (`--experimental`), tail Worker: the defaults before issue 35': {config: shard({tail: true, loader: true}), experimental: true},
  'shard config, loader (`--experimental`), counting main module (nobody tails): the defaults': {
    config: shard({tail: true, loader: true, traced: false}),
    experimental: true,
  },
  'bare + an empty tail Worker': {config: custom(', tails = ["tail"]', [EMPTY_TAIL]), experimental: false},
  'bare + a streaming tail Worker counting outcomes': {config: custom(', streamingTails = ["tail"]', [STREAMING_TAIL]), experimental: false},
  'bare behind a main module counting outcomes and exceptions': {config: custom('', [], [COUNTING_MAIN]), experimental: false},
  'bare at 40 % of its closed-loop req/s (open loop)': {
    config: (dir) => renderValidationConfig([hello], renderOptions(dir)),
    experimental: false,
    rateShare: 0.4,
  },
}

async function start(label: string, variant: Variant): Promise<{url: string; pid: number; stop(): Promise<void>}> {
  // Short: Unix socket paths have a bound (SUN_LEN).
  const dir = path.join(workDir, String(Object.keys(variants).indexOf(label)))
  mkdirSync(dir, {recursive: true})
  const config = variant.config(dir)
  writeFileSync(path.join(dir, 'config.capnp'), config.text)
  const outcome = await WorkerdProcess.start({
    configPath: path.join(dir, 'config.capnp'),
    sockets: config.sockets,
    cwd: dir,
    startTimeoutMs: 120_000,
    experimental: variant.experimental,
  })
  if (!outcome.ok) throw new Error(`${label}: ${outcome.error}`)
  const {process} = outcome
  return {url: `http://127.0.0.1:${process.ports.get('hello')}/`, pid: process.pid, stop: () => process.stop()}
}

type Run = LoadResult & {workerdUs: number}
const started = new Map<string, Awaited<ReturnType<typeof start>>>()
try {
  for (const [label, variant] of Object.entries(variants)) started.set(label, await start(label, variant))
  const runs = new Map<string, Run[]>([...started.keys()].map((label) => [label, []]))
  log(`# ${machineLoad()}`)
  for (const served of started.values()) await load(served.url, 1)
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [label, served] of started) {
      const before = cpuMs(served.pid)
      const share = variants[label]!.rateShare
      const result = await load(served.url, SECONDS, share === undefined ? undefined : Math.round(share * runs.get('bare workerd (baseline)')!.at(-1)!.rps))
      runs.get(label)!.push({...result, workerdUs: ((cpuMs(served.pid) - before) * 1000) / result.requests})
    }
    log(`# round ${round} (${machineLoad()})`)
  }
  const baseline = runs.get('bare workerd (baseline)')!
  const ratio = (of: Run[], field: 'rps' | 'workerdUs') => median(of.map((run, index) => run[field] / baseline[index]![field]))
  const m = (of: Run[], field: keyof Run) => median(of.map((run) => run[field] as number))
  console.log(
    [
      `${new Date().toISOString()}, ${machineLoad()}; ${ROUNDS} interleaved rounds of ${SECONDS} s; medians (ratios: per round, then the median); tail listener posts: ${posts}`,
      '',
      '| workerd serving hello | req/s | ÷ bare | p99 ms | failed | workerd CPU µs/req | ÷ bare |',
      '|---|---|---|---|---|---|---|',
      ...[...runs].map(
        ([label, of]) =>
          `| ${label} | ${m(of, 'rps').toFixed(0)} | ${ratio(of, 'rps').toFixed(2)}× | ${m(of, 'p99Ms').toFixed(2)} | ${of.reduce((sum, run) => sum + run.failures, 0)} | ${m(of, 'workerdUs').toFixed(0)} | ${ratio(of, 'workerdUs').toFixed(2)}× |`,
      ),
    ].join('\n'),
  )
} finally {
  for (const served of [...started.values()].reverse()) await served.stop()
  codeServer.close()
  sinkServer.close()
  rmSync(workDir, {recursive: true, force: true})
}
