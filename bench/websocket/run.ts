// WebSocket benchmark, in one run:
//   1. message round trip (send, wait for the echo) through the edge host's data plane against the same
//      echo Worker on a bare workerd process configured as the host would run it (the baseline):
//      rounds interleaved, medians, and the ratio of medians;
//   2. what a redeploy does to open sockets: sockets to the redeployed Worker, to another Worker of
//      its shard and to a Worker of another shard — which close, with what code, how long after the
//      upload began, and whether a client reconnects at once. Once for a shard of plain Workers
//      (overlap swap) and once for a shard holding the Durable Object chat room (hold swap: the
//      shard's requests wait for the swap).
//
//   node --import tsx bench/websocket/run.ts [--messages 2000] [--rounds 3]
//
// Prints a Markdown summary for BENCHMARKS.md.
import {createHash} from 'node:crypto'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import pino from 'pino'
import {WebSocket} from 'undici'
import {startHost, type RunningHost} from '../../src/edge-host/host.js'
import {renderValidationConfig} from '../../src/workerd/config.js'
import {WorkerdProcess} from '../../src/workerd/process.js'
import type {UploadScript} from '../../src/protocol/management-api.js'
import {paths} from '../support/paths.js'
import {HostClient, pairHost} from '../support/host.js'
import {log, machineLoad, median, percentile} from '../support/stats.js'

const {values: options} = parseArgs({
  options: {
    messages: {type: 'string', default: '2000'},
    rounds: {type: 'string', default: '3'},
  },
})
const MESSAGES = Number(options.messages)
const ROUNDS = Number(options.rounds)
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-ws-'))

/** Echoes every message back; `tag` makes each deployed Worker distinct code. */
const echoWorker = (tag: string) => `export default {
  fetch(request) {
    if (request.headers.get('upgrade') !== 'websocket') return new Response(${JSON.stringify(tag)})
    const [client, server] = Object.values(new WebSocketPair())
    server.accept()
    server.addEventListener('message', (event) => server.send(event.data))
    return new Response(null, {status: 101, webSocket: client})
  },
}
`

const scriptName = (label: string) => `dw-${createHash('sha256').update(label).digest('hex').slice(0, 48)}`

function upload(source: string): UploadScript {
  return {
    releaseGeneration: createHash('sha256').update(source).digest('hex').slice(0, 32),
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    builderPolicy: 'department-worker-project-v2.9',
    modules: [{name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')}],
  }
}

const CHAT_ROOM = new URL('../../fixtures/workers/chat-room/', import.meta.url)

/** fixtures/workers/chat-room: a Durable Object holding hibernatable WebSockets. */
function chatRoom(tag: string): UploadScript {
  const source = `${readFileSync(new URL('index.js', CHAT_ROOM), 'utf8')}\n// ${tag}\n`
  return {
    ...upload(source),
    modules: [
      {name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')},
      {name: 'page.html', type: 'text', contentBase64: readFileSync(new URL('page.html', CHAT_ROOM)).toString('base64')},
    ],
    bindings: [{type: 'durable_object_namespace', name: 'ROOMS', className: 'ChatRoom'}],
  }
}

async function startPairedHost(dir: string): Promise<{host: RunningHost; client: HostClient}> {
  const host = await startHost({
    dataDir: dir,
    settings: {listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', shards: 2, coalesce_window_ms: 20},
    logger: pino({level: 'silent'}),
  })
  return {host, client: new HostClient(host.adminUrl, await pairHost(host.adminUrl, host.issuedPairingCode!))}
}

/** The echo Worker alone on a bare workerd, configured as the host would run it. */
async function startBareWorkerd(source: string): Promise<{process: WorkerdProcess; url: string}> {
  const dir = path.join(workDir, 'bare')
  mkdirSync(dir, {recursive: true})
  const sha256 = createHash('sha256').update(source).digest('hex')
  writeFileSync(path.join(dir, sha256), source)
  const script = {
    name: 'echo',
    releaseGeneration: 'bench',
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    compatibilityFlags: [],
    modules: [{name: 'index.js', type: 'esModule' as const, sha256, size: source.length}],
    bindings: [],
    secrets: [],
    runtimeConfig: [],
    operationSettingsJson: null,
    serviceAccounts: [],
    crons: [],
    queueConsumers: [],
  }
  const config = renderValidationConfig([script], {
    modulePath: (digest) => digest,
    egressAllow: ['public'],
    serviceBindingAddress: 'unix:/nonexistent',
    socketAddress: () => '127.0.0.1:0',
  })
  writeFileSync(path.join(dir, 'config.capnp'), config.text)
  const outcome = await WorkerdProcess.start({configPath: path.join(dir, 'config.capnp'), sockets: config.sockets, cwd: dir, startTimeoutMs: 30_000})
  if (!outcome.ok) throw new Error(outcome.error)
  return {process: outcome.process, url: `ws://127.0.0.1:${outcome.process.ports.get(script.name)}/`}
}

interface Socket {
  socket: WebSocket
  next(): Promise<string>
  closed: Promise<{code: number; at: number}>
}

function open(url: string): Promise<Socket> {
  const socket = new WebSocket(url)
  const queue: string[] = []
  const waiting: Array<(message: string) => void> = []
  socket.addEventListener('message', (event) => {
    const taker = waiting.shift()
    if (taker) taker(String(event.data))
    else queue.push(String(event.data))
  })
  const closed = new Promise<{code: number; at: number}>((resolve) =>
    socket.addEventListener('close', (event) => resolve({code: event.code, at: performance.now()})),
  )
  return new Promise((resolve, reject) => {
    socket.addEventListener('open', () =>
      resolve({socket, closed, next: () => (queue.length > 0 ? Promise.resolve(queue.shift()!) : new Promise((take) => waiting.push(take)))}),
    )
    socket.addEventListener('error', () => reject(new Error(`WebSocket to ${url} failed`)))
  })
}

/** Round-trip times (ms) of `count` messages sent one at a time on one socket. */
async function roundTrips(url: string, count: number): Promise<number[]> {
  const connection = await open(url)
  const times: number[] = []
  for (let index = 0; index < count + 100; index++) {
    const began = performance.now()
    connection.socket.send(`m${index}`)
    if ((await connection.next()) !== `m${index}`) throw new Error('echo mismatch')
    if (index >= 100) times.push(performance.now() - began) // the first 100 warm up
  }
  connection.socket.close()
  return times
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const fixed = (value: number, digits = 3) => value.toFixed(digits)

async function main(): Promise<void> {
  const source = echoWorker('echo')
  const bare = await startBareWorkerd(source)
  const {host, client} = await startPairedHost(path.join(workDir, 'host'))
  try {
    const echo = scriptName('bench/ws/echo')
    await client.deploy(echo, upload(source))
    const throughHost = `${host.publicUrl.replace(/^http/, 'ws')}/${echo}/`
    log(`round trips: ${ROUNDS} rounds of ${MESSAGES} messages (${machineLoad()})`)
    const rows: Array<{round: number; bare: number[]; host: number[]}> = []
    for (let round = 1; round <= ROUNDS; round++) {
      const bareTimes = await roundTrips(bare.url, MESSAGES)
      const hostTimes = await roundTrips(throughHost, MESSAGES)
      rows.push({round, bare: bareTimes, host: hostTimes})
      log(`  round ${round}: bare p50 ${fixed(median(bareTimes))} ms, host p50 ${fixed(median(hostTimes))} ms`)
    }
    const loadAfterRoundTrips = machineLoad()

    // Redeploy effects. A and B share a shard (plain Workers: overlap swap); C and the chat room R
    // share the other (R has Durable Objects: hold swap).
    const names = {A: scriptName('bench/ws/a'), C: scriptName('bench/ws/c'), B: scriptName('bench/ws/b')}
    for (const [label, name] of Object.entries(names)) await client.deploy(name, upload(echoWorker(`worker ${label}`)))
    const room = scriptName('bench/ws/room')
    await client.deploy(room, chatRoom('first'))
    const inventory = (await client.call('GET', paths.inventory)).body as {scripts: Array<{name: string; shard: number}>}
    const shardOf = (name: string) => inventory.scripts.find((script) => script.name === name)!.shard
    const url = (name: string) => `${host.publicUrl.replace(/^http/, 'ws')}/${name}/`
    const redeployEffects = async (target: string, redeploy: UploadScript, others: Record<string, string>) => {
      const opened = async ([label, name]: [string, string]) => {
        const socket = await open(url(name))
        if (name === room) await socket.next() // the chat room greets each member
        return [label, socket] as const
      }
      const sockets = Object.fromEntries(await Promise.all(Object.entries({target, ...others}).map(opened)))
      const began = performance.now()
      await client.deploy(target, redeploy)
      const live = performance.now() - began
      const effects: Record<string, string> = {}
      for (const [label, socket] of Object.entries(sockets)) {
        const closed = await Promise.race([socket.closed, sleep(500).then(() => null)])
        if (closed) {
          effects[label] = `closed ${closed.code} after ${fixed(closed.at - began, 0)} ms`
          continue
        }
        socket.socket.send('still there?')
        const echoed = await Promise.race([socket.next(), sleep(2_000).then(() => null)])
        effects[label] = echoed === null ? 'open, but no answer' : 'open, still answers'
      }
      const reconnect = performance.now()
      const again = await open(url(target))
      if (target !== room) again.socket.send('hello again')
      await again.next()
      const reconnectMs = performance.now() - reconnect
      for (const socket of [again, ...Object.values(sockets)]) socket.socket.close()
      return {live, effects, reconnectMs}
    }
    const overlap = await redeployEffects(names.A, upload(echoWorker('worker A, redeployed')), {B: names.B, C: names.C})
    const hold = await redeployEffects(room, chatRoom('redeployed'), {C: names.C, A: names.A})

    const allBare = rows.flatMap((row) => row.bare)
    const allHost = rows.flatMap((row) => row.host)
    console.log(`WebSocket round trip, ${ROUNDS} rounds × ${MESSAGES} messages (${loadAfterRoundTrips}):\n`)
    console.log('| round | bare workerd p50 ms | through the host p50 ms | ratio |')
    console.log('|---|---|---|---|')
    for (const row of rows) {
      console.log(`| ${row.round} | ${fixed(median(row.bare))} | ${fixed(median(row.host))} | ${fixed(median(row.host) / median(row.bare), 2)} |`)
    }
    console.log(
      `| all | ${fixed(median(allBare))} (p99 ${fixed(percentile(allBare, 99))}) | ${fixed(median(allHost))} (p99 ${fixed(percentile(allHost, 99))}) | **${fixed(median(allHost) / median(allBare), 2)}** |`,
    )
    console.log(`\nRedeploys with sockets open (A, B on shard ${shardOf(names.A)}; C and the chat room R on shard ${shardOf(names.C)}):\n`)
    console.log('| redeployed | swap | upload → live ms | socket to it | same shard | other shard | new socket to it opens in |')
    console.log('|---|---|---|---|---|---|---|')
    console.log(
      `| A (echo) | overlap | ${fixed(overlap.live, 0)} | ${overlap.effects.target} | B: ${overlap.effects.B} | C: ${overlap.effects.C} | ${fixed(overlap.reconnectMs, 0)} ms |`,
    )
    console.log(
      `| R (chat room, Durable Object) | hold | ${fixed(hold.live, 0)} | ${hold.effects.target} | C: ${hold.effects.C} | A: ${hold.effects.A} | ${fixed(hold.reconnectMs, 0)} ms |`,
    )
  } finally {
    await host.stop()
    await bare.process.stop()
    rmSync(workDir, {recursive: true, force: true})
  }
}

await main()
