// Connection budgets on both listeners (issue #29, hole 2), against real hosts with small limits:
// heads and keep-alive idles time out (`host`: 1 s timeouts), one address holds at most its cap
// (refused: one 503 a second, the rest closed unanswered as they are accepted), a full budget
// makes room by closing a connection idle the longest, and a flood's garbage is collected once it
// is over (`roomy`: default timeouts, so nothing times out while a test holds its connections).
import {afterAll, beforeAll, expect, test} from 'vitest'
import {Agent, Client, request} from 'undici'
import {startTestHost, type TestHost} from '../support/host.js'
import {HALF_SENT_HEAD, rawConnect, statusLine} from '../support/raw-connections.js'
import {scriptNameFor, textWorker} from '../support/worker-fixtures.js'

const PER_ADDRESS = 12
const BUDGET = 40
const TIMEOUT_MS = 1_000

let host: TestHost
let roomy: TestHost
/** What `roomy` logged. */
const roomyLog: Array<Record<string, unknown>> = []
const name = scriptNameFor('connections/public')

beforeAll(async () => {
  const limits = {shards: 1, max_connections: BUDGET, max_connections_per_address: PER_ADDRESS}
  ;[host, roomy] = await Promise.all([
    startTestHost({
      settings: {
        ...limits,
        header_timeout_ms: TIMEOUT_MS,
        request_timeout_ms: TIMEOUT_MS,
        idle_timeout_ms: TIMEOUT_MS,
        admin_header_timeout_ms: TIMEOUT_MS,
        admin_request_timeout_ms: TIMEOUT_MS,
        admin_idle_timeout_ms: TIMEOUT_MS,
      },
    }),
    startTestHost({settings: limits, onLog: (entry) => roomyLog.push(entry)}),
  ])
  for (const each of [host, roomy]) {
    await each.pair()
    await each.client().deploy(name, textWorker('served'))
  }
}, 60_000)

afterAll(async () => {
  await Promise.all([host?.stop(), roomy?.stop()])
})

/** A client of its own address, on fresh keep-alive connections. */
function clientAt(localAddress: string) {
  return new Agent({connect: {localAddress}})
}

test('idle connections, half-sent heads and bodies, and idle keep-alives are closed on both listeners', async () => {
  for (const url of [host.publicUrl, host.adminUrl]) {
    const idle = await rawConnect(url, '127.0.0.2')
    const halfHead = await rawConnect(url, '127.0.0.2', HALF_SENT_HEAD)
    // Headers done, the body never: the whole request's timeout.
    const halfBody = await rawConnect(url, '127.0.0.2', `PUT /${name}/ HTTP/1.1\r\nhost: example\r\ncontent-length: 1000\r\n\r\nabc`)
    const keptAlive = await rawConnect(url, '127.0.0.2', 'GET /livez HTTP/1.1\r\nhost: example\r\n\r\n')
    expect(statusLine(await idle.closed)).toBe('HTTP/1.1 408 Request Timeout')
    expect(statusLine(await halfHead.closed)).toBe('HTTP/1.1 408 Request Timeout')
    // Answered (the Worker, or the admin listener's 404, does not wait for the body) or not, the
    // connection does not outlive the request timeout.
    expect(statusLine(await halfBody.closed)).toMatch(/^HTTP\/1\.1 \d{3} /)
    // Answered once, then closed while idle: nothing more than the one answer.
    const answered = await keptAlive.closed
    expect(statusLine(answered)).toBe('HTTP/1.1 200 OK')
    expect(answered.match(/HTTP\/1\.1 /g)).toHaveLength(1)
  }
}, 30_000)

/** A refusal: the 503 (at most one a second per address), or closed with no answer. */
const isRefusal = (answer: string) => answer === '' || answer.includes('"code":"too_many_connections"')

test('one address holds at most its cap on each listener; the rest are refused (503 first) and others are served', async () => {
  const held = await Promise.all(Array.from({length: PER_ADDRESS + 5}, () => rawConnect(host.publicUrl, '127.0.0.3')))
  const answers = await Promise.all(held.map((connection) => connection.closed))
  const refusals = answers.filter(isRefusal)
  expect(refusals).toHaveLength(5)
  expect(statusLine(refusals.find((answer) => answer !== '') ?? '')).toBe('HTTP/1.1 503 Service Unavailable')
  // The ones held were closed only by the header timeout.
  expect(answers.filter((text) => statusLine(text) === 'HTTP/1.1 408 Request Timeout')).toHaveLength(PER_ADDRESS)
}, 30_000)

test('the cap is per listener and per address: a capped address still reaches the admin listener, another address the data plane', async () => {
  const held = await Promise.all(Array.from({length: PER_ADDRESS}, () => rawConnect(roomy.publicUrl, '127.0.0.4')))
  const refused = await rawConnect(roomy.publicUrl, '127.0.0.4')
  expect(await refused.closed).toContain('too_many_connections')
  const admin = await request(`${roomy.adminUrl}/livez`, {dispatcher: clientAt('127.0.0.4')})
  expect(admin.statusCode).toBe(200)
  await admin.body.dump()
  const other = await request(`${roomy.publicUrl}/${name}/`, {dispatcher: clientAt('127.0.0.5')})
  expect(await other.body.text()).toBe('served')
  for (const connection of held) connection.socket.destroy()
})

test('a full budget closes the connection idle the longest to serve a new client', async () => {
  // From several addresses, each under its cap: together they fill the budget.
  const addresses = ['127.0.0.6', '127.0.0.7', '127.0.0.8', '127.0.0.9']
  const held = []
  for (const address of addresses) {
    for (let i = 0; i < BUDGET / addresses.length; i++) held.push(await rawConnect(roomy.publicUrl, address, i % 2 ? HALF_SENT_HEAD : ''))
  }
  const client = clientAt('127.0.0.10')
  for (let i = 0; i < 5; i++) {
    // A new connection each time (reset), so each needs room in the budget.
    const response = await request(`${roomy.publicUrl}/${name}/`, {dispatcher: client, reset: true})
    expect(response.statusCode).toBe(200)
    expect(await response.body.text()).toBe('served')
  }
  // Room was made by closing held connections, with no answer, as an idle connection closes.
  expect(await Promise.race(held.map((connection) => connection.closed))).toBe('')
  for (const connection of held) connection.socket.destroy()
}, 30_000)

test('pipelined requests on one connection (run one at a time) are all answered, in order', async () => {
  const pipelined = Array.from({length: 5}, (_, i) => `GET /${name}/${i} HTTP/1.1\r\nhost: example\r\n\r\n`).join('')
  const connection = await rawConnect(roomy.publicUrl, '127.0.0.11', `${pipelined}GET /livez HTTP/1.1\r\nhost: example\r\nconnection: close\r\n\r\n`)
  const answer = await connection.closed
  expect(answer.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(6)
  expect(answer.match(/served/g)).toHaveLength(5)
})

test("an address's refused connections, reopened in waves, never reset another client's keep-alive connection", async () => {
  const client = new Client(roomy.publicUrl, {connect: {localAddress: '127.0.0.12'}})
  const disconnects: string[] = []
  client.on('disconnect', (_origin, _targets, error) => disconnects.push(error.message))
  const held = await Promise.all(Array.from({length: PER_ADDRESS}, () => rawConnect(roomy.publicUrl, '127.0.0.13')))
  try {
    for (let wave = 0; wave < 5; wave++) {
      const refused = await Promise.all(Array.from({length: 50}, () => rawConnect(roomy.publicUrl, '127.0.0.13')))
      const [answers, response] = await Promise.all([
        Promise.all(refused.map((connection) => connection.closed)),
        client.request({path: `/${name}/`, method: 'GET'}),
      ])
      expect(answers.every(isRefusal)).toBe(true)
      expect(response.statusCode).toBe(200)
      expect(await response.body.text()).toBe('served')
    }
    // One connection served every request: none was closed under it.
    expect(disconnects).toEqual([])
  } finally {
    await client.close()
    for (const connection of held) connection.socket.destroy()
  }
}, 30_000)

/** The host's count of client connections held, from its /metrics. */
async function openConnections(each: TestHost): Promise<number> {
  const text = await (await fetch(`${each.adminUrl}/metrics`)).text()
  return Number(/^edgeworkers_host_connections_open (\d+)/m.exec(text)?.[1])
}

test("a flood from a capped address is refused mostly unanswered; after it the host is back to its baseline and has collected the flood's garbage", async () => {
  const baseline = await openConnections(roomy)
  const held = await Promise.all(Array.from({length: PER_ADDRESS}, () => rawConnect(roomy.publicUrl, '127.0.0.14')))
  const answers: string[] = []
  // 2,500 connections in waves: at least 1,000 of them within one of the host's 5 s sweeps.
  for (let wave = 0; wave < 10; wave++) {
    const refused = await Promise.all(Array.from({length: 250}, () => rawConnect(roomy.publicUrl, '127.0.0.14')))
    answers.push(...(await Promise.all(refused.map((connection) => connection.closed))))
  }
  expect(answers.every(isRefusal)).toBe(true)
  const answered = answers.filter((answer) => answer !== '').length
  expect(answered).toBeGreaterThan(0)
  // One answer a second at most: the rest were closed before they became sockets.
  expect(answered).toBeLessThan(answers.length / 10)
  for (const connection of held) connection.socket.destroy()
  await expect.poll(() => openConnections(roomy), {timeout: 10_000}).toBeLessThanOrEqual(baseline)
  await expect.poll(() => roomyLog.some((entry) => entry.msg === 'connection flood over; heap collected'), {timeout: 30_000}).toBe(true)
}, 90_000)
