// 1. Requests/s and p50/p99 latency of fixtures/workers/hello through the host (data plane → shard →
// script), in both code-loading modes, against the same script on a bare workerd process (the
// baseline), and beside them the other data-plane options, each in front of (or inside) a bare
// workerd: a plain Node proxy, a raw node:http proxy and routing inside workerd. For each: the CPU
// time per request of the hop process and of workerd, read from /proc over the same rounds.
import {mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import {Agent} from 'undici'
import {WorkerdProcess} from '../../src/workerd/process.js'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {machineLoad, median} from '../support/stats.js'
import {CONNECTIONS, HELLO, ROUNDS, SECONDS, workDir} from './options.js'
import {cpuMs, load, shardPid, startBareWorkerdWith, startMeasuredHost, type LoadResult} from './support.js'

/** The hello Worker alone on a bare workerd, configured as the host would run it. */
async function startBareWorkerd(source: string): Promise<{process: WorkerdProcess; url: string}> {
  const bare = await startBareWorkerdWith([{name: 'hello', source}], 'bare')
  return {process: bare.process, url: `http://127.0.0.1:${bare.process.ports.get('hello')}/`}
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

/** Measures, and answers the Markdown lines of its table and aims. */
export async function measureThroughput(): Promise<string[]> {
  const helloSource = readFileSync(HELLO, 'utf8')
  // 1. Throughput and CPU: bare workerd, the other hops in front of (or inside) one, and the host, in
  //    interleaved rounds. `hop`: the process doing the routing besides workerd (none for bare/router).
  const throughputHost = await startMeasuredHost(path.join(workDir, 'throughput'), {code_loading: 'loader'})
  const restartHost = await startMeasuredHost(path.join(workDir, 'throughput-restart'), {code_loading: 'restart'})
  const bare = await startBareWorkerd(helloSource)
  const router = await startRouterWorkerd(helloSource)
  const hello = scriptNameFor('bench/hello')
  await throughputHost.client.deploy(hello, moduleUpload(helloSource))
  await restartHost.client.deploy(hello, moduleUpload(helloSource))
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

  const row = (label: string, target: Target) => {
    const result = summary(runs[target])
    const hop = targets[target].hop ? result.hopUsPerRequest.toFixed(0) : '–'
    return `| ${label} | ${result.rps.toFixed(0)} | ${result.p50Ms.toFixed(2)} | ${result.p99Ms.toFixed(2)} | ${result.failures} | ${ratioToBare(runs[target]).toFixed(2)} | ${hop} | ${result.workerdUsPerRequest.toFixed(0)} |`
  }
  return [
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
  ]
}
