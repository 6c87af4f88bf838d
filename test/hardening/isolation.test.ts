// One tenant cannot take down its shard-mates (issue #15, findings 2 and 4; issue #29, hole 4): an
// infinite loop and a memory bomb run on the same shard as a victim Worker, under both code-loading
// modes and the default watchdog limits. During an offender's first incident at most one of the
// victim's requests fails; the replacement process (under the loader, the spare started ahead)
// serves before the runaway is killed; the offender is moved to a shard of its own, so its second and third incidents cost the victim
// nothing; it is quarantined by its third (503 worker_quarantined, until a new deploy, which
// puts it back on the shared shard). A bomb request is never replayed, and no workerd listens on
// TCP. A process that is only slow — stopped, so it burns no CPU — is not taken for a runaway.
import {existsSync, readdirSync, readFileSync, readlinkSync} from 'node:fs'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import type {Inventory} from '../../src/protocol/management-api.js'
import {paths} from '../support/paths.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {moduleUpload, scriptNameFor, textWorker} from '../support/worker-fixtures.js'

const victim = scriptNameFor('isolation/victim')
const looper = scriptNameFor('isolation/looper')
const bomb = scriptNameFor('isolation/bomb')

// Behind the HAProxy front door (host.front), Workers on their own sockets are served by HAProxy alone: the watchdog
// blames its oldest request, and HAProxy replays the victim's (../edge-host/front.test.ts shows the fast path).
for (const [codeLoading, front] of [
  ['loader', 'node'],
  ['restart', 'node'],
  ['restart', 'haproxy'],
] as const) {
  describe(`host.code_loading = "${codeLoading}", host.front = "${front}"`, () => {
    let host: TestHost
    let client: HostClient
    const logs: Array<Record<string, unknown>> = []

    beforeAll(async () => {
      // One shared shard: the three Workers share one workerd process. The watchdog's limits are the defaults.
      host = await startTestHost({
        settings: {shards: 1, shard_memory_limit_mb: 256, quarantine_after_incidents: 3, code_loading: codeLoading, front},
        onLog: (entry) => logs.push(entry),
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

    const metricsText = async () => (await fetch(`${host.adminUrl}/metrics`)).text()

    async function get(name: string): Promise<{status: number; text: string}> {
      try {
        const response = await request(`${host.publicUrl}/${name}/`, {headersTimeout: 60_000, bodyTimeout: 60_000})
        return {status: response.statusCode, text: await response.body.text()}
      } catch (error) {
        return {status: 0, text: String(error)}
      }
    }

    /**
     * Sends one offending request while two clients keep asking the victim, until the offender's
     * answer came back. Returns the offender's answer and the victim's answers meanwhile.
     */
    async function incident(offender: string): Promise<{offender: {status: number; text: string}; victim: Array<{status: number; text: string}>}> {
      let done = false
      const offending = get(offender).then((answer) => {
        done = true
        return answer
      })
      const answers: Array<{status: number; text: string}> = []
      const asking = async () => {
        while (!done) answers.push(await get(victim))
      }
      await Promise.all([asking(), asking()])
      expect(await get(victim)).toEqual({status: 200, text: 'victim'})
      return {offender: await offending, victim: answers}
    }

    const inventory = async () => (await client.call('GET', paths.inventory)).body as Inventory
    const failed = (answers: Array<{status: number; text: string}>) => answers.filter((answer) => answer.status !== 200 || answer.text !== 'victim')

    /** The pids of shard 0's live workerd processes (a replaced one stays recorded until it exited). */
    function shardPids(): number[] {
      return readdirSync(path.join(host.dataDir, 'runtime', 'pids'))
        .filter((file) => /^shard-0\.\d+$/.test(file))
        .map((file) => Number(file.split('.')[1]))
        .filter((pid) => existsSync(`/proc/${pid}/stat`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z'))
    }

    /** The pid of shard 0's workerd, once the ones the deploys replaced have exited. */
    async function shardPid(): Promise<number> {
      await expect.poll(() => shardPids().length, {timeout: 30_000}).toBe(1)
      return shardPids()[0]!
    }

    test('a shard stopped for longer than the CPU limit, with a request inside, is not killed: it burned no CPU', async () => {
      expect(await get(victim)).toEqual({status: 200, text: 'victim'})
      const pid = await shardPid()
      process.kill(pid, 'SIGSTOP')
      let answer: Promise<{status: number; text: string}>
      try {
        answer = get(victim)
        // 5× request_cpu_limit_ms (500 ms), the watchdog looking every 100 ms: on the wall clock a stall.
        await new Promise((resolve) => setTimeout(resolve, 2_500))
      } finally {
        process.kill(pid, 'SIGCONT')
      }
      expect(await answer).toEqual({status: 200, text: 'victim'})
      expect(await shardPid()).toBe(pid)
      const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
      expect(metrics).not.toMatch(/edgeworkers_host_shard_restarts_total\{shard="0",reason="runaway"\}/)
      expect(incidentsOf(metrics, victim)).toBe(0)
    }, 30_000)

    describe('a runaway Worker next to a victim on the same shard', () => {
      for (const [label, offender, ownShard] of [
        ['an infinite loop', looper, 1],
        ['a memory bomb', bomb, 2],
      ] as const) {
        test(`${label}: the victim loses at most one request, the offender moves to a shard of its own after its first incident and is quarantined by its third`, async () => {
          // The spare the last incident took is started again a moment later.
          if (codeLoading === 'loader')
            await expect.poll(async () => (await metricsText()).includes('edgeworkers_host_spare_process_ready 1'), {timeout: 30_000}).toBe(true)
          const first = await incident(offender)
          // The offending request fails; it is never replayed (one incident per request).
          expect(first.offender.status).not.toBe(200)
          expect(failed(first.victim).length).toBeLessThanOrEqual(1)
          // The replacement served before the runaway was killed.
          const killed = logs.findIndex((entry) => entry.msg === 'runaway process killed' && entry.shard === 0)
          expect(killed).toBeGreaterThan(-1)
          const replacement = logs[killed]!.replacement
          expect(replacement).toEqual(expect.any(Number))
          const serving = logs.findIndex((entry) => entry.msg === 'shard serving' && entry.reason === 'runaway' && entry.workerdPid === replacement)
          expect(serving).toBeGreaterThan(-1)
          expect(serving).toBeLessThanOrEqual(killed)
          // Under the loader the replacement is the spare process, started before the incident.
          expect(logs[serving]!.spare).toBe(codeLoading === 'loader')
          logs.length = 0
          // Moved to a shard of its own, which serves it; the victim stays alone on shard 0.
          await expect.poll(async () => (await inventory()).shards.find((shard) => shard.index === ownShard)?.scripts, {timeout: 30_000}).toBe(1)
          const restartsOfShard0 = (await inventory()).shards.find((shard) => shard.index === 0)!.restarts
          let metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
          expect(incidentsOf(metrics, offender)).toBe(1)

          for (let round = 2; round <= 3; round++) {
            const next = await incident(offender)
            expect(next.offender.status).not.toBe(200)
            // On its own shard it holds no neighbour's thread: every victim request succeeds.
            expect(failed(next.victim)).toEqual([])
            metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
            expect(incidentsOf(metrics, offender)).toBe(round)
          }
          expect((await inventory()).shards.find((shard) => shard.index === 0)!.restarts).toBe(restartsOfShard0)
          const quarantined = await get(offender)
          expect(quarantined.status).toBe(503)
          expect(JSON.parse(quarantined.text)).toMatchObject({code: 'worker_quarantined'})
          expect(await get(victim)).toEqual({status: 200, text: 'victim'})
          metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
          expect(metrics).toMatch(new RegExp(`edgeworkers_host_worker_quarantines_total\\{script="${offender}"\\} 1`))
          expect(incidentsOf(metrics, victim)).toBe(0)
          // Behind HAProxy the victim was served by its fast path (counted by status class).
          if (front === 'haproxy') expect(metrics).toMatch(new RegExp(`edgeworkers_host_requests_total\\{script="${victim}",status="2xx"\\} [1-9]`))
          // Visible to the kit (host status reads the inventory).
          const listed = await inventory()
          expect(listed.quarantined.map((entry) => entry.script)).toContain(offender)
          expect(listed.quarantined.find((entry) => entry.script === offender)).toMatchObject({incidents: 3})
        }, 120_000)
      }

      test('a new deploy lifts the quarantine and puts the Worker back on the shared shard', async () => {
        await client.deploy(looper, textWorker('fixed'))
        expect(await get(looper)).toEqual({status: 200, text: 'fixed'})
        const listed = await inventory()
        expect(listed.quarantined.map((entry) => entry.script)).toEqual([bomb])
        expect(listed.shards.find((shard) => shard.index === 0)!.scripts).toBe(2)
        await expect.poll(async () => (await inventory()).shards.find((shard) => shard.index === 1)?.scripts, {timeout: 30_000}).toBe(0)
        expect(await get(victim)).toEqual({status: 200, text: 'victim'})
      }, 60_000)
    })

    test('workerd listens on no TCP port: every Worker socket is a Unix socket in the 0700 runtime dir', async () => {
      // The incidents above restart shard 0: wait until it serves again.
      expect(await get(victim)).toEqual({status: 200, text: 'victim'})
      // The host records each running workerd as runtime/pids/<label>.<pid> (a spare keeps its label
      // once a shard takes it). A process a restart just replaced may still be recorded while it
      // exits: look at every live one.
      const pids = readdirSync(path.join(host.dataDir, 'runtime', 'pids'))
        .filter((file) => /^(shard-\d+|spare)\.\d+$/.test(file))
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
      expect(unixListeners.length).toBeGreaterThanOrEqual(2) // health + the Workers of the shard (or the loader)
    })
  })
}

function incidentsOf(metrics: string, script: string): number {
  return [...metrics.matchAll(new RegExp(`edgeworkers_host_worker_incidents_total\\{script="${script}",kind="\\w+"\\} (\\d+)`, 'g'))].reduce(
    (sum, match) => sum + Number(match[1]),
    0,
  )
}

/** An fd can close between listing and reading it. */
function readlinkOrEmpty(link: string): string {
  try {
    return readlinkSync(link)
  } catch {
    return ''
  }
}
