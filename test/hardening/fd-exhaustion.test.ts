// Idle connections must not take the data plane down (issue #29, hole 2): `host serve` as its own
// process, started with a soft fd limit of 512 under a hard limit of 1,024 (the usual default).
// It runs with the hard limit (Node raises the soft one as it starts) and says so; then 1,200 idle
// and 200 half-sent connections from one address, and 1,200 idle ones spread over eight addresses
// (past the budget), leave another client's requests all served. Before the budgets, the idle
// connections used up the descriptors and every other request failed.
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {Agent, request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {readHostInfo, type HostInfo} from '../../src/edge-host/host-info.js'
import {CLI_BIN} from '../support/cli.js'
import {HostClient} from '../support/host.js'
import {paths} from '../support/paths.js'
import {HALF_SENT_HEAD, rawConnect, type RawConnection} from '../support/raw-connections.js'
import {scriptNameFor, textWorker} from '../support/worker-fixtures.js'

const SOFT = 512
const HARD = 1_024

let dataDir: string
let serve: ChildProcess
let stdout = ''
let stderr = ''
let info: HostInfo
const name = scriptNameFor('fd-exhaustion/public')

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-fd-host-'))
  serve = spawn(
    'prlimit',
    [`--nofile=${SOFT}:${HARD}`, process.execPath, CLI_BIN, 'host', 'serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'],
    {env: {...process.env, EDGEWORKERS_HOST__SHARDS: '1', EDGEWORKERS_LOG_LEVEL: 'info', EDGEWORKERS_LOG_FORMAT: 'json'}},
  )
  serve.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  serve.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const deadline = Date.now() + 120_000
  for (;;) {
    const found = await readHostInfo(dataDir)
    if (found) {
      info = found
      break
    }
    if (serve.exitCode !== null || Date.now() > deadline) throw new Error(`host serve did not start: ${stderr}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  // host.json is written before the code is printed, and the pipe may bring the line a moment later.
  for (;;) {
    if (/pairing code: \S+/.test(stderr)) break
    if (serve.exitCode !== null || Date.now() > deadline) throw new Error(`host serve printed no pairing code: ${stderr}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const code = /pairing code: (\S+)/.exec(stderr)?.[1]
  const pair = await fetch(`${info.adminUrl}${paths.pair}`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({code})})
  const {secret} = (await pair.json()) as {secret: string}
  await new HostClient(() => info.adminUrl, secret).deploy(name, textWorker('served'))
}, 180_000)

afterAll(async () => {
  if (serve?.exitCode === null) {
    const exited = new Promise((resolve) => serve.once('exit', resolve))
    serve.kill('SIGTERM')
    await exited
  }
  if (dataDir) rmSync(dataDir, {recursive: true, force: true})
})

test('the host runs with its soft fd limit at the hard limit and logs the figure and its connection budget', () => {
  const limits = readFileSync(`/proc/${info.pid}/limits`, 'utf8')
  expect(limits).toMatch(new RegExp(`Max open files\\s+${HARD}\\s+${HARD}\\s`))
  const line = stdout
    .split('\n')
    .filter(Boolean)
    .map((text) => JSON.parse(text) as Record<string, unknown>)
    .find((entry) => entry.msg === 'file descriptor limit')
  expect(line).toMatchObject({fdLimit: HARD, fdHardLimit: HARD, maxConnections: (HARD - 256) / 2})
})

/** Requests from an address of their own, each on a new connection: all must be served. */
async function probe(count: number): Promise<number[]> {
  const client = new Agent({connect: {localAddress: '127.0.0.200'}})
  const statuses: number[] = []
  for (let i = 0; i < count; i++) {
    const response = await request(`${info.publicUrl}/${name}/`, {dispatcher: client, reset: true}).catch((error: Error) => ({statusCode: 0, error}))
    statuses.push(response.statusCode)
    if ('body' in response) await response.body.dump()
  }
  await client.close()
  return statuses
}

async function hold(addresses: string[], perAddress: number, head = ''): Promise<RawConnection[]> {
  const held: RawConnection[] = []
  for (const address of addresses) {
    held.push(...(await Promise.all(Array.from({length: perAddress}, () => rawConnect(info.publicUrl, address, head)))))
  }
  return held
}

test('1,200 idle and 200 half-sent connections from one address leave another client served', async () => {
  const held = [...(await hold(['127.0.0.2'], 1_200)), ...(await hold(['127.0.0.2'], 200, HALF_SENT_HEAD))]
  expect(await probe(20)).toEqual(Array(20).fill(200))
  // Past the cap they were refused; those within it are still open.
  expect(held.filter((connection) => !connection.isClosed()).length).toBeGreaterThan(0)
  for (const connection of held) connection.socket.destroy()
}, 60_000)

test('1,200 idle connections over eight addresses, past the budget, leave another client served', async () => {
  const addresses = Array.from({length: 8}, (_, i) => `127.0.1.${i + 1}`)
  const held = await hold(addresses, 150)
  expect(await probe(20)).toEqual(Array(20).fill(200))
  for (const connection of held) connection.socket.destroy()
}, 60_000)
