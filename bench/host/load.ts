// A closed-loop HTTP load generator, run as its own process so it does not share an event loop
// with the server it measures: CONNECTIONS keep-alive connections each send GET PATH back to back
// for SECONDS (or until SIGTERM), and it prints one JSON line
// {requests, seconds, rps, p50Ms, p99Ms, maxMs, failures, slow, loadUs} (slow: requests over SLOW_MS;
// loadUs: its own CPU time per request, µs). With RATE it is an open loop instead: RATE requests a
// second are started on schedule whether or not earlier ones have answered (queued for a free
// connection when all are busy), each timed from when it was due, so a server that falls behind
// shows it in the latencies rather than in fewer requests sent.
//
//   node --import tsx bench/host/load.ts <url> <connections> <seconds> [host header] [slow ms] [rate]
import {setTimeout as sleep} from 'node:timers/promises'
import {Pool} from 'undici'

const [url, connectionsText, secondsText, hostHeader, slowText, rateText] = process.argv.slice(2)
if (!url || !connectionsText || !secondsText) throw new Error('usage: load.ts <url> <connections> <seconds>')
const target = new URL(url)
const connections = Number(connectionsText)
const seconds = Number(secondsText)
const slowMs = slowText ? Number(slowText) : Infinity
const pool = new Pool(target.origin, {connections, pipelining: 1})

const latencies: number[] = []
let failures = 0
let running = true

/** One request, timed from `due`. */
async function send(due: number): Promise<void> {
  try {
    const response = await pool.request({path: `${target.pathname}${target.search}`, method: 'GET', headers: hostHeader ? {host: hostHeader} : {}})
    await response.body.dump()
    if (response.statusCode !== 200) failures++
  } catch {
    failures++
  }
  latencies.push(performance.now() - due)
}

async function loop(): Promise<void> {
  while (running) await send(performance.now())
}

async function openLoop(rate: number): Promise<void> {
  const sent = new Set<Promise<void>>()
  let due = performance.now()
  while (running) {
    for (const now = performance.now(); due <= now; due += 1000 / rate) {
      const request = send(due).finally(() => sent.delete(request))
      sent.add(request)
    }
    await sleep(1)
  }
  await Promise.all(sent)
}

const began = performance.now()
const cpuBefore = process.cpuUsage()
const timer = setTimeout(() => (running = false), seconds * 1000)
process.once('SIGTERM', () => {
  clearTimeout(timer)
  running = false
})
await (rateText ? openLoop(Number(rateText)) : Promise.all(Array.from({length: connections}, loop)))
const elapsed = (performance.now() - began) / 1000
const cpu = process.cpuUsage(cpuBefore)
await pool.close()

latencies.sort((a, b) => a - b)
const percentile = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0
process.stdout.write(
  `${JSON.stringify({
    requests: latencies.length,
    seconds: elapsed,
    rps: latencies.length / elapsed,
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    maxMs: latencies.at(-1) ?? 0,
    failures,
    slow: latencies.filter((latency) => latency > slowMs).length,
    loadUs: (cpu.user + cpu.system) / Math.max(1, latencies.length),
  })}\n`,
)
