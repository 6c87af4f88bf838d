// One tenant cannot take down its shard-mates (issue #15, findings 2 and 4): an infinite loop and a
// memory bomb run on the same shard as a victim Worker. The victim answers again after every
// incident, each offender is quarantined by its third incident (503 worker_quarantined, until a
// new deploy), a bomb request is never replayed, and no workerd listens on TCP. A process that is
// only slow — stopped, so it burns no CPU — is not taken for a runaway.
import {existsSync, readdirSync, readFileSync, readlinkSync} from 'node:fs'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import type {Inventory} from '../../src/protocol/management-api.js'
import {paths} from '../support/paths.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {moduleUpload, scriptNameFor, textWorker} from '../support/worker-fixtures.js'

let host: TestHost
let client: HostClient
const victim = scriptNameFor('isolation/victim')
const looper = scriptNameFor('isolation/looper')
const bomb = scriptNameFor('isolation/bomb')

beforeAll(async () => {
  // One shard: the three Workers share one workerd process.
  host = await startTestHost({
    settings: {shards: 1, request_cpu_limit_ms: 1_000, watchdog_interval_ms: 100, shard_memory_limit_mb: 256, quarantine_after_incidents: 3},
  })
  await host.pair()
  client = host.client()
  await client.deploy(victim, textWorker('victim'))
  await client.deploy(looper, moduleUpload('export default { fetch() { for (;;) {} } }'))
  await client.deploy(bomb, moduleUpload('export default { fetch() { const hoard = []; for (;;) hoard.push(new Uint8Array(16 << 20).fill(1)) } }'))
}, 60_000)

afterAll(async () => {
  await host?.stop()
})

async function get(name: string): Promise<{status: number; text: string}> {
  try {
    const response = await request(`${host.publicUrl}/${name}/`, {headersTimeout: 60_000, bodyTimeout: 60_000})
    return {status: response.statusCode, text: await response.body.text()}
  } catch (error) {
    return {status: 0, text: String(error)}
  }
}

/**
 * Sends one offending request and, meanwhile, asks the victim every 50 ms until the offender's
 * answer came back. Returns the offender's answer and the victim's unavailability: from the first
 * victim request that did not succeed at once to the next one that succeeded. A victim request
 * workerd had already read when it was killed may fail (it is never replayed); held or unread ones
 * are served by the new process.
 */
async function incident(offender: string): Promise<{offender: {status: number; text: string}; victimDownMs: number}> {
  const offending = get(offender)
  let done = false
  const answered = offending.then((answer) => {
    done = true
    return answer
  })
  let downSince: number | null = null
  let victimDownMs = 0
  while (!done) {
    const began = performance.now()
    const answer = await get(victim)
    const ok = answer.status === 200 && answer.text === 'victim'
    if (ok && performance.now() - began < 200 && downSince === null) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      continue
    }
    downSince ??= began
    if (ok) {
      victimDownMs = Math.max(victimDownMs, performance.now() - downSince)
      downSince = null
    } else {
      expect(answer.status).toBeGreaterThanOrEqual(500)
    }
  }
  const after = await get(victim)
  expect(after).toEqual({status: 200, text: 'victim'})
  return {offender: await answered, victimDownMs}
}

function incidentsOf(metrics: string, script: string): number {
  return [...metrics.matchAll(new RegExp(`edgeworkers_host_worker_incidents_total\\{script="${script}",kind="\\w+"\\} (\\d+)`, 'g'))].reduce(
    (sum, match) => sum + Number(match[1]),
    0,
  )
}

/** The pid of shard 0's live workerd (a replaced one may still be recorded while it exits). */
function shardPid(): number {
  const [pid] = readdirSync(path.join(host.dataDir, 'runtime', 'pids'))
    .filter((file) => /^shard-0\.\d+$/.test(file))
    .map((file) => Number(file.split('.')[1]))
    .filter((pid) => existsSync(`/proc/${pid}/stat`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z'))
  return pid!
}

test('a shard stopped for longer than the CPU limit, with a request inside, is not killed: it burned no CPU', async () => {
  expect(await get(victim)).toEqual({status: 200, text: 'victim'})
  const pid = shardPid()
  process.kill(pid, 'SIGSTOP')
  let answer: Promise<{status: number; text: string}>
  try {
    answer = get(victim)
    // 2.5× request_cpu_limit_ms, the watchdog looking every 100 ms: on the wall clock a stall.
    await new Promise((resolve) => setTimeout(resolve, 2_500))
  } finally {
    process.kill(pid, 'SIGCONT')
  }
  expect(await answer).toEqual({status: 200, text: 'victim'})
  expect(shardPid()).toBe(pid)
  const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
  expect(metrics).not.toMatch(/edgeworkers_host_shard_restarts_total\{shard="0",reason="runaway"\}/)
  expect(incidentsOf(metrics, victim)).toBe(0)
}, 30_000)

describe('a runaway Worker next to a victim on the same shard', () => {
  for (const [label, offender] of [
    ['an infinite loop', looper],
    ['a memory bomb', bomb],
  ] as const) {
    test(`${label}: the victim answers after each incident, and the offender is quarantined by its third`, async () => {
      const downs: number[] = []
      for (let round = 1; round <= 3; round++) {
        const {offender: answer, victimDownMs} = await incident(offender)
        downs.push(Math.round(victimDownMs))
        // The offending request fails; it is never replayed (one incident per request).
        expect(answer.status).not.toBe(200)
        const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
        expect(incidentsOf(metrics, offender)).toBe(round)
      }
      console.log(`${label}: victim unavailable at most ${downs.join(', ')} ms in incidents 1–3`)
      const quarantined = await get(offender)
      expect(quarantined.status).toBe(503)
      expect(JSON.parse(quarantined.text)).toMatchObject({code: 'worker_quarantined'})
      expect(await get(victim)).toEqual({status: 200, text: 'victim'})
      const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
      expect(metrics).toMatch(new RegExp(`edgeworkers_host_worker_quarantines_total\\{script="${offender}"\\} 1`))
      expect(incidentsOf(metrics, victim)).toBe(0)
      // Visible to the kit (host status reads the inventory).
      const inventory = (await client.call('GET', paths.inventory)).body as Inventory
      expect(inventory.quarantined.map((entry) => entry.script)).toContain(offender)
      expect(inventory.quarantined.find((entry) => entry.script === offender)).toMatchObject({incidents: 3})
    }, 120_000)
  }

  test('a new deploy lifts the quarantine', async () => {
    await client.deploy(looper, textWorker('fixed'))
    expect(await get(looper)).toEqual({status: 200, text: 'fixed'})
    const inventory = (await client.call('GET', paths.inventory)).body as Inventory
    expect(inventory.quarantined.map((entry) => entry.script)).toEqual([bomb])
    expect(await get(victim)).toEqual({status: 200, text: 'victim'})
  }, 60_000)
})

test('workerd listens on no TCP port: every Worker socket is a Unix socket in the 0700 runtime dir', async () => {
  // The incidents above restart shard 0: wait until it serves again.
  expect(await get(victim)).toEqual({status: 200, text: 'victim'})
  // The host records each running workerd as runtime/pids/<label>.<pid>. A process a restart just
  // replaced may still be recorded while it exits: look at every live one of shard 0.
  const pids = readdirSync(path.join(host.dataDir, 'runtime', 'pids'))
    .filter((file) => /^shard-0\.\d+$/.test(file))
    .map((file) => Number(file.split('.')[1]))
    .filter((pid) => existsSync(`/proc/${pid}/fd`))
  const socketInodes = new Set(
    pids.flatMap((pid) =>
      readdirSync(`/proc/${pid}/fd`)
        .map((fd) => /^socket:\[(\d+)\]$/.exec(readlinkOrEmpty(`/proc/${pid}/fd/${fd}`))?.[1])
        .filter((inode): inode is string => inode !== undefined),
    ),
  )
  expect(socketInodes.size).toBeGreaterThan(0)
  const tcpListeners = ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((fields) => fields[3] === '0A' && socketInodes.has(fields[9]!)),
  )
  expect(tcpListeners).toEqual([])
  const unixListeners = readFileSync('/proc/net/unix', 'utf8')
    .split('\n')
    .filter((line) => socketInodes.has(line.trim().split(/\s+/)[6] ?? '') && line.includes(path.join(host.dataDir, 'runtime', 'sock')))
  expect(unixListeners.length).toBeGreaterThanOrEqual(3) // health + the Workers of the shard
})

/** An fd can close between listing and reading it. */
function readlinkOrEmpty(link: string): string {
  try {
    return readlinkSync(link)
  } catch {
    return ''
  }
}
