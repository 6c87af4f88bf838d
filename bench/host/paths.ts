// Where a request's CPU goes in workerd, and what a proxy in front of it costs (issue 35): the same
// hello Worker served by workerd in the ways the data plane could run it, each in its own process,
// interleaved per round against the bare Worker, with the CPU time per request of every process
// read from /proc:
// - bare: the Worker on its own socket (the baseline), and with the shard's tail Worker attached;
// - through the shard's loader Worker (host.code_loading = "loader", the real loader source and
//   code listener), without and with the tail Worker, and a loader that hands the request on
//   as it came (no copy of its headers to drop the load id);
// - the bare Worker behind a C proxy on its Unix socket (nginx, HAProxy: Debian's), as the host's
//   Node hop could be replaced: listening sockets are bound here (port 0) and passed down; and
//   behind the least a Node.js hop does (./node-proxy.ts), the floor of any host written in Node.
// The load id reaches the loader the way the host sends it, as a header: here the loader's socket
// injects it (workerd's injectRequestHeaders), so the load generator sends plain GETs everywhere.
//
//   node --import tsx bench/host/paths.ts --seconds 5 --rounds 5 --connections 16
import {type ChildProcess, spawn} from 'node:child_process'
import {mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import {userInfo} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {createCodeServer} from '../../src/edge-host/runtime/code-server.js'
import {settingsSchema} from '../../src/config/schema.js'
import {capnpString} from '../../src/workerd/capnp.js'
import {LOAD_HEADER, loaderWorkerSource} from '../../src/workerd/loader-worker.js'
import {WorkerdProcess} from '../../src/workerd/process.js'
import {renderTailServices, TAIL_SERVICE, TAIL_SINK_SERVICE, TAIL_WORKER_SOURCE} from '../../src/workerd/tail-worker.js'
import {log, machineLoad, median} from '../support/stats.js'
import {HELLO, ROUNDS, SECONDS, workDir} from './options.js'
import {benchScript, cpuMs, load, type LoadResult} from './support.js'

const source = readFileSync(HELLO, 'utf8')
const LOAD_ID = 'hello:bench:1'
const hello = benchScript('hello', source, workDir)
const NODE_PROXY = fileURLToPath(new URL('./node-proxy.ts', import.meta.url))
const MAX_EVENTS_PER_SECOND = settingsSchema.parse({data_dir: '/nonexistent'}).host.tail_max_events_per_second

/** Unix sockets of the host's listeners the loader and the tail Worker reach, served here. */
const listen = (server: http.Server, socket: string) => new Promise<void>((resolve) => server.listen(socket, resolve))
const codeSocket = path.join(workDir, 'code.sock')
const sinkSocket = path.join(workDir, 'sink.sock')
const codeServer = createCodeServer(
  (id) => (id === LOAD_ID ? hello : undefined),
  () => Buffer.from(source),
)
// The host's tail listener when nobody tails: it takes the counters and asks for no trace.
const sinkServer = http.createServer((request, response) => {
  request
    .resume()
    .once('end', () =>
      response.writeHead(200, {'content-type': 'application/json'}).end(JSON.stringify({forward: [], maxEventsPerSecond: MAX_EVENTS_PER_SECOND})),
    )
})
await Promise.all([listen(codeServer, codeSocket), listen(sinkServer, sinkSocket)])

const EGRESS = '(name = "egress", network = (allow = ["public"]))'
const helloWorker = (tailed: boolean) =>
  `(name = "hello", worker = (modules = [(name = "index.js", esModule = ${capnpString(source)})], compatibilityDate = "2026-11-01", globalOutbound = "egress"${
    tailed ? `, tails = [(name = "${TAIL_SERVICE}", props = (json = ${capnpString(JSON.stringify({script: 'hello'}))}))]` : ''
  }))`

/** A loader Worker as a shard runs it; `handOn` rewrites how it passes the request to the loaded Worker. */
function loaderServices(tailed: boolean, handOn?: (source: string) => string): string[] {
  let loader = loaderWorkerSource({
    tailModule: tailed ? 'tail.js' : null,
    serviceTargetHeader: 'x-target',
    serviceCallerHeader: 'x-caller',
    experimental: false,
  })
  if (handOn) loader = handOn(loader)
  const modules = [
    `(name = "loader.js", esModule = ${capnpString(loader)})`,
    ...(tailed ? [`(name = "tail.js", esModule = ${capnpString(TAIL_WORKER_SOURCE)})`] : []),
  ]
  return [
    `(name = "hello", worker = (modules = [${modules.join(', ')}], compatibilityDate = "2025-06-01", compatibilityFlags = ["enable_ctx_exports"],
      bindings = [(name = "LOADER", workerLoader = ()), (name = "EGRESS", service = "egress"), (name = "CODE", service = "code"), (name = "HOST_SERVICES", service = "services")${
        tailed ? `, (name = "SINK", service = "${TAIL_SINK_SERVICE}")` : ''
      }]))`,
    `(name = "code", external = (address = ${capnpString(`unix:${codeSocket}`)}, http = ()))`,
    `(name = "services", external = (address = "unix:/nonexistent", http = ()))`,
  ]
}

/** The loader handing the loaded Worker the request it got (the load id header stays on it). */
const noCopy = (loader: string) =>
  loader.replace(
    'const headers = new Headers(request.headers);\n    headers.delete(LOAD_HEADER);\n    return worker.getEntrypoint().fetch(new Request(request, {headers}));',
    'return worker.getEntrypoint().fetch(request);',
  )

/** Routing inside workerd: a router Worker on the socket calls the Worker through a service binding. */
const ROUTER = `(name = "router", worker = (modules = [(name = "router.js", esModule = "export default { fetch(request, env) { return env.HELLO.fetch(request) } }")], compatibilityDate = "2026-11-01", bindings = [(name = "HELLO", service = "hello-worker")]))`

interface Served {
  /** The URL the load generator sends to. */
  url: string
  /** Processes whose CPU counts as the path's workerd, and as the proxy in front (if any). */
  workerd: number
  proxy: number | null
  stop(): Promise<void>
}

/** One workerd serving `services`, its `hello` service on a TCP port (injecting `inject` headers) and on a Unix socket. */
async function startWorkerd(label: string, services: string[], inject: Record<string, string> = {}, service = 'hello'): Promise<Served & {unixSocket: string}> {
  const dir = path.join(workDir, label)
  mkdirSync(dir, {recursive: true})
  const unixSocket = path.join(dir, 'hello.sock')
  const http = `http = (injectRequestHeaders = [${Object.entries(inject).map(([name, value]) => `(name = ${capnpString(name)}, value = ${capnpString(value)})`)}])`
  const config = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [${[...services, EGRESS].join(',\n    ')}],
  sockets = [
    (name = "tcp", address = "127.0.0.1:0", ${http}, service = ${capnpString(service)}),
    (name = "unix", address = ${capnpString(`unix:${unixSocket}`)}, ${http}, service = ${capnpString(service)})
  ]
);
`
  writeFileSync(path.join(dir, 'config.capnp'), config)
  const outcome = await WorkerdProcess.start({
    configPath: path.join(dir, 'config.capnp'),
    sockets: ['tcp', 'unix'],
    cwd: dir,
    startTimeoutMs: 120_000,
    experimental: true,
  })
  if (!outcome.ok) throw new Error(`${label}: ${outcome.error}`)
  const {process} = outcome
  return {url: `http://127.0.0.1:${process.ports.get('tcp')}/`, workerd: process.pid, proxy: null, unixSocket, stop: () => process.stop()}
}

function fdOf(server: net.Server): number {
  return (server as unknown as {_handle: {fd: number}})._handle.fd
}

/** `proxy` (nginx or haproxy) on a listening socket bound here to a port the OS picked (neither binds port 0) and passed down as fd 3, forwarding to `upstream` (a Unix socket) over keep-alive connections. */
async function startProxy(kind: 'nginx' | 'haproxy', upstream: Served & {unixSocket: string}): Promise<Served> {
  const dir = path.join(workDir, kind)
  mkdirSync(dir, {recursive: true})
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as net.AddressInfo).port
  let child: ChildProcess
  if (kind === 'nginx') {
    writeFileSync(
      path.join(dir, 'nginx.conf'),
      `daemon off; worker_processes 1; user ${userInfo().username}; pid ${dir}/nginx.pid; error_log stderr error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}; proxy_temp_path ${dir}; fastcgi_temp_path ${dir}; uwsgi_temp_path ${dir}; scgi_temp_path ${dir};
  upstream shard { server unix:${upstream.unixSocket}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / { proxy_pass http://shard; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header x-request-id $request_id; proxy_buffering off; }
  }
}
`,
    )
    child = spawn('nginx', ['-c', path.join(dir, 'nginx.conf'), '-p', dir], {
      stdio: ['ignore', 'inherit', 'inherit', fdOf(server)],
      env: {...process.env, NGINX: '3;'},
    })
  } else {
    writeFileSync(
      path.join(dir, 'haproxy.cfg'),
      `global
  nbthread 1
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend public
  bind fd@3
  unique-id-format %[uuid()]
  http-request set-header x-request-id %[unique-id]
  default_backend shard
backend shard
  server shard ${upstream.unixSocket}
`,
    )
    child = spawn('haproxy', ['-db', '-f', path.join(dir, 'haproxy.cfg')], {stdio: ['ignore', 'ignore', 'inherit', fdOf(server)]})
  }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  const url = `http://127.0.0.1:${port}/`
  // Up once it answers.
  for (let tries = 0; ; tries++) {
    const ok = await fetch(url).then(
      (response) => response.ok || void log(`${kind}: ${response.status}`),
      (error) => void log(`${kind}: ${error.cause ?? error}`),
    )
    if (ok) break
    if (tries > 50) throw new Error(`${kind} did not answer on ${url}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const exited = new Promise((resolve) => child.once('exit', resolve))
  // nginx takes a passed socket only with its master process: the worker is its child.
  const worker = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim()
  return {
    url,
    workerd: upstream.workerd,
    proxy: worker === '' ? child.pid! : Number(worker.split(' ')[0]),
    stop: async () => void (child.kill('SIGTERM'), await exited),
  }
}

/** ./node-proxy.ts in front of `upstream`: the floor of a Node.js hop. */
async function startNodeProxy(mode: 'undici' | 'http', upstream: Served & {unixSocket: string}): Promise<Served> {
  const child = spawn(process.execPath, ['--import', 'tsx', NODE_PROXY, mode, upstream.unixSocket], {stdio: ['ignore', 'pipe', 'inherit']})
  const port = await new Promise<string>((resolve) => child.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString().trim())))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  return {url: `http://127.0.0.1:${port}/`, workerd: upstream.workerd, proxy: child.pid!, stop: async () => void (child.kill('SIGTERM'), await exited)}
}

type Run = LoadResult & {workerdUs: number; proxyUs: number}
const inject = {[LOAD_HEADER]: LOAD_ID}
const bare = await startWorkerd('bare', [helloWorker(false)])
const paths: Record<string, Served> = {
  'bare workerd (baseline)': bare,
  'bare + tail Worker (nobody tailing)': await startWorkerd('tailed', [helloWorker(true), ...renderTailServices(`unix:${sinkSocket}`)]),
  'loader, no tail Worker': await startWorkerd('loader', loaderServices(false), inject),
  'loader + tail Worker (the host default)': await startWorkerd(
    'loader-tailed',
    [...loaderServices(true), ...renderTailServices(`unix:${sinkSocket}`)],
    inject,
  ),
  'loader handing the request on uncopied, no tail': await startWorkerd('loader-uncopied', loaderServices(false, noCopy), inject),
  'router Worker → service binding → Worker, no tail': await startWorkerd(
    'router',
    [ROUTER, helloWorker(false).replace('(name = "hello"', '(name = "hello-worker"')],
    {},
    'router',
  ),
  'nginx → bare (Unix socket, keep-alive)': await startProxy('nginx', bare),
  'HAProxy → bare (Unix socket)': await startProxy('haproxy', bare),
  'minimal Node.js proxy (node:http server, undici) → bare': await startNodeProxy('undici', bare),
  'minimal Node.js proxy (node:http server and Agent) → bare': await startNodeProxy('http', bare),
}
const runs = new Map<string, Run[]>(Object.keys(paths).map((name) => [name, []]))
try {
  log(`# ${machineLoad()}`)
  for (const served of Object.values(paths)) await load(served.url, 1)
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, served] of Object.entries(paths)) {
      const before = {workerd: cpuMs(served.workerd), proxy: served.proxy === null ? 0 : cpuMs(served.proxy)}
      const result = await load(served.url, SECONDS)
      const perRequest = (ms: number) => (ms * 1000) / result.requests
      runs.get(name)!.push({
        ...result,
        workerdUs: perRequest(cpuMs(served.workerd) - before.workerd),
        proxyUs: served.proxy === null ? 0 : perRequest(cpuMs(served.proxy) - before.proxy),
      })
    }
    log(`# round ${round} (${machineLoad()})`)
  }
  const baseline = runs.get('bare workerd (baseline)')!
  const ratio = (of: Run[], field: 'rps' | 'workerdUs' | 'proxyUs') =>
    median(of.map((run, index) => run[field] / baseline[index]![field === 'proxyUs' ? 'workerdUs' : field]))
  const m = (of: Run[], field: keyof Run) => median(of.map((run) => run[field] as number))
  console.log(
    [
      `${new Date().toISOString()}, ${machineLoad()}; ${ROUNDS} interleaved rounds of ${SECONDS} s; medians (ratios: per round, then the median)`,
      '',
      '| path | req/s | ÷ bare | p99 ms | failed | workerd CPU µs/req | ÷ bare | proxy CPU µs/req | ÷ bare workerd CPU |',
      '|---|---|---|---|---|---|---|---|---|',
      ...[...runs].map(
        ([name, of]) =>
          `| ${name} | ${m(of, 'rps').toFixed(0)} | ${ratio(of, 'rps').toFixed(2)}× | ${m(of, 'p99Ms').toFixed(2)} | ${of.reduce((sum, run) => sum + run.failures, 0)} | ${m(of, 'workerdUs').toFixed(0)} | ${ratio(of, 'workerdUs').toFixed(2)}× | ${
            paths[name]!.proxy === null ? '–' : m(of, 'proxyUs').toFixed(0)
          } | ${paths[name]!.proxy === null ? '–' : `${ratio(of, 'proxyUs').toFixed(2)}×`} |`,
      ),
    ].join('\n'),
  )
} finally {
  for (const served of Object.values(paths).reverse()) await served.stop()
  codeServer.close()
  sinkServer.close()
  rmSync(workDir, {recursive: true, force: true})
}
