// What the tail Worker costs workerd, in CPU per request (robust to a noisy machine, unlike
// throughput): a bare workerd serving a Worker that logs one console line per request, five ways,
// interleaved per round: no `tails` (the baseline), a tail Worker with an empty handler (the floor:
// workerd's own trace work), the host's tail Worker with nobody tailing (its sink answers that no
// script is forwarded), the script tailed (at most host.tail_max_events_per_second traces posted,
// the rest counted as sampled out), and every trace posted (forward "*": the Worker log file on). The sink stands in
// for the host's tail listener and parses each post as the host does. CPU of workerd from
// /proc/<pid>/stat over a fixed number of requests; medians of the rounds.
//
//   node --import tsx bench/tail/worker-cpu.ts [--rounds 5] [--requests 4000]
import {spawn} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {TAIL_WORKER_SOURCE} from '../../src/workerd/tail-worker.js'
import {WORKERD_BINARY} from '../../src/workerd/process.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({options: {rounds: {type: 'string', default: '5'}, requests: {type: 'string', default: '4000'}}})
const ROUNDS = Number(options.rounds)
const REQUESTS = Number(options.requests)
const CONNECTIONS = 16
const CLOCK_TICKS_PER_SECOND = 100
const WORKER = `export default { fetch(request) { console.log("hit", new URL(request.url).pathname, Date.now()); return new Response("ok") } }`

const variants = [
  {name: 'no tail Worker (baseline)', tail: null, forward: []},
  {name: 'tail Worker with an empty handler (floor)', tail: 'export default { tail() {} };', forward: []},
  {name: 'our tail Worker, nobody tailing', tail: TAIL_WORKER_SOURCE, forward: []},
  {name: 'our tail Worker, the script tailed (sampled)', tail: TAIL_WORKER_SOURCE, forward: ['w']},
  {name: 'our tail Worker, every trace posted (log file on)', tail: TAIL_WORKER_SOURCE, forward: '*'},
] as const
const MAX_EVENTS_PER_SECOND = settingsSchema.parse({data_dir: '/nonexistent'}).host.tail_max_events_per_second

const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-tail-cpu-'))
const sinkSocket = path.join(workDir, 'sink.sock')
let forward: readonly string[] | '*' = []
let posts = 0
const sink = http.createServer((request, response) => {
  const chunks: Buffer[] = []
  request.on('data', (chunk: Buffer) => chunks.push(chunk))
  request.on('end', () => {
    JSON.parse(Buffer.concat(chunks).toString('utf8'))
    posts++
    response.writeHead(200, {'content-type': 'application/json'}).end(JSON.stringify({forward, maxEventsPerSecond: MAX_EVENTS_PER_SECOND}))
  })
})
await new Promise<void>((resolve) => sink.listen(sinkSocket, resolve))

const capnp = (text: string) => JSON.stringify(text)

function config(tail: string | null, port: number): string {
  const tails = tail ? `, tails = [(name = "tail", props = (json = ${capnp(JSON.stringify({script: 'w'}))}))]` : ''
  const services = [`(name = "w", worker = (modules = [(name = "w.js", esModule = ${capnp(WORKER)})], compatibilityDate = "2025-01-01"${tails}))`]
  if (tail) {
    services.push(
      `(name = "tail", worker = (modules = [(name = "tail.js", esModule = ${capnp(tail)})], compatibilityDate = "2025-01-01", bindings = [(name = "SINK", service = "sink")]))`,
      `(name = "sink", external = (address = ${capnp(`unix:${sinkSocket}`)}, http = ()))`,
    )
  }
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (services = [${services.join(', ')}], sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "w")]);\n`
}

function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND
}

async function load(port: number, count: number): Promise<void> {
  const agent = new http.Agent({keepAlive: true, maxSockets: CONNECTIONS})
  let sent = 0
  const one = () =>
    new Promise<void>((resolve, reject) => {
      http.get({host: '127.0.0.1', port, path: '/x', agent}, (response) => response.resume().on('end', resolve)).on('error', reject)
    })
  await Promise.all(
    Array.from({length: CONNECTIONS}, async () => {
      while (sent++ < count) await one()
    }),
  )
  agent.destroy()
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const perRequest = variants.map(() => [] as number[])
const postsPerRound = variants.map(() => [] as number[])
log(`tail Worker CPU bench: ${ROUNDS} rounds × ${REQUESTS} requests, ${CONNECTIONS} connections; ${machineLoad()}`)
for (let round = 1; round <= ROUNDS; round++) {
  for (const [index, variant] of variants.entries()) {
    const port = 19_300 + index
    const file = path.join(workDir, `${index}.capnp`)
    writeFileSync(file, config(variant.tail, port))
    forward = variant.forward
    const child = spawn(WORKERD_BINARY, ['serve', file], {stdio: ['ignore', 'ignore', 'inherit']})
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          await load(port, 200) // warm-up, and the wait for the socket
          break
        } catch (error) {
          if (attempt > 100) throw error
          await sleep(100)
        }
      }
      await sleep(500) // the warm-up's summary post
      const before = cpuSecondsOf(child.pid!)
      const postsBefore = posts
      await load(port, REQUESTS)
      await sleep(600) // the last summary post is workerd's work too
      perRequest[index]!.push(((cpuSecondsOf(child.pid!) - before) * 1e6) / REQUESTS)
      postsPerRound[index]!.push(posts - postsBefore)
    } finally {
      child.kill('SIGTERM')
      await new Promise((resolve) => child.once('exit', resolve))
    }
  }
  log(`round ${round}: ${variants.map((variant, index) => `${variant.name} ${perRequest[index]!.at(-1)!.toFixed(0)} µs`).join(', ')}; ${machineLoad()}`)
}
sink.close()
rmSync(workDir, {recursive: true, force: true})

const baseline = median(perRequest[0]!)
console.log(`\n### Tail Worker CPU (\`node --import tsx bench/tail/worker-cpu.ts --rounds ${ROUNDS} --requests ${REQUESTS}\`)\n`)
console.log(`Machine: ${machineLoad()} (at the end of the run).\n`)
console.log('| workerd serving | CPU µs per request (median) | posts to the sink per round | CPU vs no tail Worker |')
console.log('|---|---:|---:|---:|')
for (const [index, variant] of variants.entries()) {
  const cpu = median(perRequest[index]!)
  console.log(`| ${variant.name} | ${cpu.toFixed(0)} | ${median(postsPerRound[index]!)} | ${(cpu / baseline).toFixed(2)}× |`)
}
