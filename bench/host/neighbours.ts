// 4. What deploys of Worker A do to Worker B of the same shard (under the loader): B under sustained
// load (and holding open WebSockets) during DEPLOYS redeploys of A, against B under the same load
// without deploys right before: failed requests, requests slower than 4× the undisturbed p99, closed
// WebSockets.
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {WebSocket} from 'undici'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {machineLoad} from '../support/stats.js'
import {CONNECTIONS, DEPLOYS, workDir} from './options.js'
import {load, restartsOf, startLoad, startMeasuredHost, variant, type LoadResult} from './support.js'

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
  const {host, client} = await startMeasuredHost(path.join(workDir, 'disturb'), {code_loading: 'loader'})
  const a = scriptNameFor('bench/disturb/a')
  const b = scriptNameFor('bench/disturb/b')
  await client.deploy(b, moduleUpload(ECHO_WORKER))
  await client.deploy(a, moduleUpload(variant(-1)))
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
  for (let round = 0; round < DEPLOYS; round++) await client.deploy(a, moduleUpload(`${variant(round)}// deploy ${round}\n`))
  const deploySeconds = (performance.now() - began) / 1000
  disturbed.stop()
  open = false
  for (const socket of sockets) socket.close()
  const restarts = await restartsOf(host)
  await host.stop()
  return {quiet, disturbed: await disturbed.result, slowMs, closedSockets, deploySeconds, restarts}
}

/** Measures, and answers the Markdown lines of its table and aim. */
export async function measureNeighbours(): Promise<string[]> {
  const disturbance = await measureDisturbance()
  return [
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
  ]
}
