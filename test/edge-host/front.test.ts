// host.front = "haproxy": a real HAProxy child in front of a real host and real workerd. The fast
// path (HAProxy straight to a settled public Worker's own socket) is taken — its requests count by
// status class ("2xx") where the Node data plane counts statuses ("200") — and gives what the Node
// data plane gives; everything it cannot decide goes through the Node data plane unchanged; table
// changes are in force when the host acknowledges them; HAProxy is restarted when it dies and goes
// when the host dies.
import {spawn} from 'node:child_process'
import {createHash} from 'node:crypto'
import {readdirSync, readFileSync} from 'node:fs'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {Pool, request, WebSocket} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {parseStats, runtimeCommands} from '../../src/edge-host/front/runtime-api.js'
import {readHostInfo} from '../../src/edge-host/host-info.js'
import {signRequest} from '../../src/protocol/signing.js'
import {CLI_BIN} from '../support/cli.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {paths} from '../support/paths.js'
import {rawConnect, statusLine} from '../support/raw-connections.js'
import {moduleUpload, scriptNameFor, textWorker} from '../support/worker-fixtures.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const ECHO = `export default {
  fetch(request) {
    return Response.json({url: request.url, headers: Object.fromEntries(request.headers)})
  },
}
`

let host: TestHost
let client: HostClient
/** What the host logged at info and above. */
const logged: Array<Record<string, unknown>> = []

beforeAll(async () => {
  // "restart": every deploy gives the Worker its own socket (the loader's would keep it on the Node path).
  host = await startTestHost({settings: {front: 'haproxy', code_loading: 'restart', shards: 1}, onLog: (entry) => logged.push(entry)})
  await host.pair()
  client = host.client()
})

afterAll(async () => {
  await host?.stop()
})

async function get(url: string, headers: Record<string, string> = {}) {
  const response = await request(url, {headers})
  return {status: response.statusCode, headers: response.headers, text: await response.body.text()}
}

/** The host's request counter for `script`, by its status label. */
async function requestCounts(script: string): Promise<Record<string, number>> {
  const text = await (await request(`${host.adminUrl}/metrics`)).body.text()
  const counts: Record<string, number> = {}
  for (const match of text.matchAll(/^edgeworkers_host_requests_total\{([^}]*)\} (\d+)/gm)) {
    const labels = Object.fromEntries([...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((label) => [label[1], label[2]]))
    if (labels.script === script) counts[labels.status!] = (counts[labels.status!] ?? 0) + Number(match[2])
  }
  return counts
}

/** GETs `script` and says whether HAProxy's fast path answered it (its count by status class grew). */
async function servedFast(script: string): Promise<{text: string; fast: boolean}> {
  const before = (await requestCounts(script))['2xx'] ?? 0
  const {text} = await get(`${host.publicUrl}/${script}/`)
  return {text, fast: ((await requestCounts(script))['2xx'] ?? 0) > before}
}

/** The pid of the haproxy serving this host's front door (its configuration is in the data dir). */
function haproxyPids(dataDir: string): number[] {
  const config = path.join(dataDir, 'runtime', 'front', 'haproxy.cfg')
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(config)
      } catch {
        return false
      }
    })
    .map(Number)
}

async function until<T>(check: () => T | Promise<T>, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

describe('the fast path', () => {
  const name = scriptNameFor('front/echo')

  beforeAll(async () => {
    await client.deploy(name, moduleUpload(ECHO))
  })

  test('serves a settled public Worker from HAProxy, as the Node data plane would', async () => {
    const before = await requestCounts(name)
    const byPath = await get(`${host.publicUrl}/${name}/a/b?c=1`, {'x-edgeworkers-client-address': '6.6.6.6', 'x-edgeworkers-load': 'x'})
    expect(byPath.status).toBe(200)
    const seen = JSON.parse(byPath.text) as {url: string; headers: Record<string, string>}
    expect(seen.url).toBe(`http://${name}.workers.localhost/a/b?c=1`)
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1')
    expect(seen.headers['x-request-id']).toMatch(UUID)
    expect(seen.headers['x-edgeworkers-client-address']).toBeUndefined()
    expect(seen.headers['x-edgeworkers-load']).toBeUndefined()
    expect(byPath.headers['x-request-id']).toBe(seen.headers['x-request-id'])
    // By host name, and the client's own request id kept.
    const id = '0b4a5f0e-8f1e-4c2a-9a53-0c1e2d3f4a5b'
    const byHost = await get(`${host.publicUrl}/x`, {host: `${name}.workers.localhost`, 'x-request-id': id})
    expect(JSON.parse(byHost.text)).toMatchObject({url: `http://${name}.workers.localhost/x`, headers: {'x-request-id': id}})
    expect(byHost.headers['x-request-id']).toBe(id)
    // Bare `/<script>`: the Worker sees `/`.
    expect(JSON.parse((await get(`${host.publicUrl}/${name}`)).text)).toMatchObject({url: `http://${name}.workers.localhost/`})
    // Counted, and by HAProxy: the Node data plane would have counted status 200.
    const after = await requestCounts(name)
    expect((after['2xx'] ?? 0) - (before['2xx'] ?? 0)).toBe(3)
    expect(after['200'] ?? 0).toBe(before['200'] ?? 0)
  })

  test('a tail attached takes the Worker to the Node data plane, which the tail sees', async () => {
    const target = paths.tail(name)
    const tail = await request(`${host.adminUrl}${target}`, {headers: signRequest({secret: client.secret, method: 'GET', target})})
    expect(tail.statusCode).toBe(200)
    const before = await requestCounts(name)
    const answer = await get(`${host.publicUrl}/${name}/tailed`)
    expect(answer.status).toBe(200)
    expect((await requestCounts(name))['200'] ?? 0).toBe((before['200'] ?? 0) + 1)
    let text = ''
    for await (const chunk of tail.body) {
      text += chunk.toString()
      if (text.includes('/tailed')) break
    }
    tail.body.destroy()
    // Detached, the Worker goes back to the fast path.
    await until(async () => {
      const counts = await requestCounts(name)
      await get(`${host.publicUrl}/${name}/after`)
      return ((await requestCounts(name))['2xx'] ?? 0) > (counts['2xx'] ?? 0)
    }, 'the fast path after the tail ended')
  })
})

describe('a deploy on the fast path', () => {
  test('a kept-alive client gets the new release at once after the acknowledgement', async () => {
    const name = scriptNameFor('front/deployed')
    await client.deploy(name, textWorker('first'))
    // One connection, kept alive across the deploy (HAProxy keeps its own to the old process too).
    const connection = new Pool(host.publicUrl, {connections: 1, pipelining: 1})
    try {
      const ask = async () => (await connection.request({path: `/${name}/`, method: 'GET'})).body.text()
      const before = await requestCounts(name)
      for (let index = 0; index < 3; index++) expect(await ask()).toBe('first')
      await client.deploy(name, textWorker('second'))
      expect(await ask()).toBe('second')
      const after = await requestCounts(name)
      expect((after['2xx'] ?? 0) - (before['2xx'] ?? 0)).toBe(4)
    } finally {
      await connection.close()
    }
  })
})

/**
 * A Worker counting its POSTs in KV under `label` (the count read, then written). A POST of `slow` marks itself
 * started in KV and answers 1.5 s later: longer than workerd's own grace when the host stops it. A GET says
 * whether a slow one started.
 */
function kvCounter(label: string) {
  return moduleUpload(
    `export default {
  async fetch(request, env) {
    if (request.method === 'GET') return new Response(String(await env.CACHE.get('slow')))
    if ((await request.text()) === 'slow') {
      await env.CACHE.put('slow', 'started')
      await new Promise((resolve) => setTimeout(resolve, 1500))
    }
    const count = Number((await env.CACHE.get('count')) ?? 0) + 1
    await env.CACHE.put('count', String(count))
    return new Response(${JSON.stringify(label)} + ' ' + count)
  },
}
`,
    {bindings: [{type: 'kv_namespace', name: 'CACHE', namespaceId: 'front-kv'}]},
  )
}

describe('a Worker with storage (its KV namespace is a Durable Object) on the fast path', () => {
  test('is served fast; a deploy, whose swap holds requests, waits for those inside, keeps the data and loses no request', async () => {
    const name = scriptNameFor('front/kv')
    await client.deploy(name, kvCounter('first'))
    expect(await until(async () => (await servedFast(name)).fast, 'the fast path')).toBe(true)
    const connection = new Pool(host.publicUrl, {connections: 4, pipelining: 1})
    // With a body: HAProxy never sends such a request again, so one cut by the swap would be answered 502.
    const post = async (body: string) => {
      const response = await connection.request({path: `/${name}/`, method: 'POST', body})
      return `${response.statusCode} ${await response.body.text()}`
    }
    const answers: string[] = []
    let asking = true
    const askers = Array.from({length: 3}, async () => {
      while (asking) answers.push(await post('count'))
    })
    try {
      await until(() => answers.length >= 10, 'requests before the deploy')
      const slow = post('slow')
      await until(async () => (await get(`${host.publicUrl}/${name}/`)).text === 'started', 'the slow request inside the Worker')
      await client.deploy(name, kvCounter('second'))
      answers.push(await slow)
      const acknowledged = answers.length
      await until(() => answers.length >= acknowledged + 10, 'requests after the deploy')
    } finally {
      asking = false
      await Promise.all(askers)
      await connection.close()
    }
    // Every request answered by the Worker, the slow one by the release it reached; the new release counts on from
    // where the old one got (concurrent read-then-write requests may count as one, but the count never goes back).
    expect(answers.filter((answer) => !/^200 (first|second) \d+$/.test(answer))).toEqual([])
    const highest = (label: string) => Math.max(...answers.filter((answer) => answer.includes(label)).map((answer) => Number(answer.split(' ')[2])))
    expect(highest('second')).toBeGreaterThan(highest('first'))
    // The new release is back on the fast path.
    expect(await until(async () => (await servedFast(name)).fast, 'the fast path after the deploy')).toBe(true)
  }, 60_000)
})

describe('what the Node data plane decides, behind HAProxy', () => {
  test('unknown Workers: the exact 404 body with the request id', async () => {
    const answer = await get(`${host.publicUrl}/${scriptNameFor('front/nobody')}/`)
    expect(answer.status).toBe(404)
    const id = answer.headers['x-request-id'] as string
    expect(id).toMatch(UUID)
    expect(answer.text).toBe(`{"code":"worker_not_found","message":"Worker not found","requestId":"${id}"}`)
  })

  test('retire: the 404 at once after the acknowledgement', async () => {
    const name = scriptNameFor('front/retired')
    await client.deploy(name, textWorker('soon retired'))
    expect(await servedFast(name)).toEqual({text: 'soon retired', fast: true})
    expect((await client.call('POST', paths.retire(name))).status).toBe(200)
    const answer = await get(`${host.publicUrl}/${name}/`)
    expect(answer.status).toBe(404)
    expect(answer.text).toBe(`{"code":"worker_not_found","message":"Worker not found","requestId":"${answer.headers['x-request-id']}"}`)
  })

  test('lockdown: 403 worker_retired at once after the acknowledgement', async () => {
    const name = scriptNameFor('front/locked')
    await client.deploy(name, textWorker('tenant code'))
    expect(await servedFast(name)).toEqual({text: 'tenant code', fast: true})
    expect((await client.call('POST', paths.lockdown(name))).status).toBe(200)
    const answer = await get(`${host.publicUrl}/${name}/x`)
    expect(answer).toMatchObject({status: 403, text: '{"code":"worker_retired","message":"Forbidden"}'})
  })

  test('an api_key policy: decided by the Node data plane, with the client address HAProxy saw', async () => {
    const name = scriptNameFor('front/policy')
    await client.deploy(name, textWorker('behind a key'))
    expect(await servedFast(name)).toEqual({text: 'behind a key', fast: true})
    expect(
      (
        await client.call('PUT', paths.accessPolicy(name), {
          mode: 'api_key',
          apiKeySha256: createHash('sha256').update('k3y-for-tests-0123').digest('hex'),
          apiKeyLastFour: '0123',
        })
      ).status,
    ).toBe(200)
    expect(await get(`${host.publicUrl}/${name}/`)).toMatchObject({status: 403, text: '{"code":"access_denied","message":"Forbidden"}'})
    expect(await get(`${host.publicUrl}/${name}/`, {'x-api-key': 'k3y-for-tests-0123'})).toMatchObject({status: 200, text: 'behind a key'})
    expect((await client.call('PUT', paths.accessPolicy(name), {mode: 'teamsync_internal', ipAllowlist: ['127.0.0.1/32']})).status).toBe(200)
    expect(await get(`${host.publicUrl}/${name}/`, {'x-edgeworkers-client-address': '10.0.0.1'})).toMatchObject({status: 200, text: 'behind a key'})
    expect((await client.call('PUT', paths.accessPolicy(name), {mode: 'teamsync_internal', ipAllowlist: ['10.0.0.0/8']})).status).toBe(200)
    expect((await get(`${host.publicUrl}/${name}/`, {'x-edgeworkers-client-address': '10.0.0.1'})).status).toBe(403)
  })
})

describe('a fast-path Worker whose workerd dies', () => {
  test('the requests after the crash are answered by the next process (HAProxy sends them again to the Node data plane)', async () => {
    const name = scriptNameFor('front/crashed')
    await client.deploy(name, textWorker('after a crash'))
    expect(await servedFast(name)).toEqual({text: 'after a crash', fast: true})
    process.kill(await shardPid(), 'SIGKILL')
    const answers = await Promise.all(Array.from({length: 3}, () => get(`${host.publicUrl}/${name}/`)))
    expect(answers.map(({status, text}) => ({status, text}))).toEqual(Array(3).fill({status: 200, text: 'after a crash'}))
  })

  test('a GET inside the process when it dies is answered by the next one (sent again, as the Node data plane does)', async () => {
    const name = scriptNameFor('front/inside')
    await client.deploy(
      name,
      moduleUpload('export default { async fetch() { await new Promise((resolve) => setTimeout(resolve, 1000)); return new Response("slow") } }'),
    )
    expect(await servedFast(name)).toEqual({text: 'slow', fast: true})
    const pid = await shardPid()
    const answer = get(`${host.publicUrl}/${name}/`)
    // The request is inside the Worker's process: HAProxy has it on a slot's Worker server.
    const adminSocket = path.join(host.dataDir, 'runtime', 'front', 'admin.sock')
    const inside = async () => parseStats(await runtimeCommands(adminSocket, ['show stat -1 4 -1'])).some((row) => row.svname === 'w' && Number(row.scur) > 0)
    await until(inside, 'the request inside the process')
    process.kill(pid, 'SIGKILL')
    expect(await answer).toMatchObject({status: 200, text: 'slow'})
  })
})

/** The pid of shard 0's workerd, once a deploy's replaced process is gone (the one left serves the Workers). */
async function shardPid(): Promise<number> {
  const pids = () => readdirSync(path.join(host.dataDir, 'runtime', 'pids')).filter((file) => file.startsWith('shard-0.'))
  const [record] = await until(() => (pids().length === 1 ? pids() : null), 'one shard process')
  return Number(path.extname(record!).slice(1))
}

describe('the activity window `status` reads', () => {
  test('counts the requests and the errors the fast path answered, with the last error', async () => {
    const name = scriptNameFor('front/failing')
    await client.deploy(
      name,
      moduleUpload('export default { fetch(request) { if (new URL(request.url).pathname === "/throw") throw new Error("boom"); return new Response("ok") } }'),
    )
    expect(await servedFast(name)).toEqual({text: 'ok', fast: true})
    expect((await get(`${host.publicUrl}/${name}/throw`)).status).toBe(500)
    const {body} = await client.call('GET', paths.workerActivity)
    expect(body.workers.find((worker: {script: string}) => worker.script === name)).toEqual({
      script: name,
      requests: 2,
      errors: 1,
      p99Ms: null,
      lastError: 'Error: boom',
    })
  })
})

describe('timeouts behind HAProxy', () => {
  let timed: TestHost
  const name = scriptNameFor('front/timed')

  beforeAll(async () => {
    timed = await startTestHost({settings: {front: 'haproxy', shards: 1, header_timeout_ms: 1_000, request_timeout_ms: 1_000, idle_timeout_ms: 1_000}})
    await timed.pair()
    await timed.client().deploy(
      name,
      moduleUpload(`export default { fetch(request) {
        if (request.headers.get('upgrade') !== 'websocket') return new Response('served')
        const [client, server] = Object.values(new WebSocketPair())
        server.accept()
        server.addEventListener('message', (event) => server.send(event.data))
        return new Response(null, {status: 101, webSocket: client})
      } }`),
    )
  })

  afterAll(async () => {
    await timed?.stop()
  })

  test('a request whose body never ends is answered, and its connection goes after the request timeout', async () => {
    const connection = await rawConnect(timed.publicUrl, '127.0.0.1', `PUT /${name}/ HTTP/1.1\r\nhost: example\r\ncontent-length: 1000\r\n\r\nabc`)
    // Not held open until the host stops (HAProxy's tunnel timeout was a day).
    const answer = await Promise.race([connection.closed, sleep(20_000).then(() => 'still open after 20 s')])
    expect(statusLine(answer)).toBe('HTTP/1.1 200 OK')
  }, 30_000)

  test('a WebSocket idle for longer than the request and idle timeouts stays open', async () => {
    const socket = new WebSocket(`${timed.publicUrl.replace('http', 'ws')}/${name}/`)
    await new Promise((resolve, reject) => {
      socket.onopen = resolve
      socket.onerror = reject
    })
    await sleep(3_000) // three request timeouts
    const echoed = new Promise((resolve) => (socket.onmessage = (event) => resolve(event.data)))
    socket.send('still here')
    expect(await echoed).toBe('still here')
    socket.close()
  }, 30_000)
})

describe('the HAProxy process', () => {
  test("logs its own news, not one line per fast slot for the host's moves: a restart and a deploy", async () => {
    const from = logged.length
    await host.restart()
    await client.deploy(scriptNameFor('front/quiet'), textWorker('quiet'))
    const lines = logged.slice(from).filter((entry) => entry.component === 'front')
    expect(lines.filter((entry) => /Proxy w\d+ stopped|Server w\d+\/\w+ is|backend 'w\d+'/.test(String(entry.msg)))).toEqual([])
    // What it says once per stop still comes.
    expect(lines.some((entry) => /Proxy public stopped/.test(String(entry.msg)))).toBe(true)
  })

  test('killed, it is restarted and serves the fast path again', async () => {
    const name = scriptNameFor('front/survivor')
    await client.deploy(name, textWorker('still here'))
    const [pid] = haproxyPids(host.dataDir)
    expect(pid).toBeDefined()
    process.kill(pid!, 'SIGKILL')
    await until(() => haproxyPids(host.dataDir).some((other) => other !== pid), 'a new haproxy')
    const answer = await until(() => get(`${host.publicUrl}/${name}/`).catch(() => null), 'an answer')
    expect(answer.text).toBe('still here')
    await until(async () => {
      const before = (await requestCounts(name))['2xx'] ?? 0
      await get(`${host.publicUrl}/${name}/`)
      return ((await requestCounts(name))['2xx'] ?? 0) > before
    }, 'the fast path in the new haproxy')
  })

  test('host.front = "auto" with a haproxy ≥ 2.4 installed runs it, says so once at start and in host.json', async () => {
    const logs: Array<Record<string, unknown>> = []
    const auto = await startTestHost({settings: {front: 'auto', shards: 1}, onLog: (entry) => logs.push(entry)})
    try {
      expect(auto.host.front).toBe('haproxy')
      expect(await readHostInfo(auto.dataDir)).toMatchObject({front: 'haproxy'})
      expect(haproxyPids(auto.dataDir)).toHaveLength(1)
      const chosen = logs.filter((entry) => String(entry.msg).startsWith('front door'))
      expect(chosen).toEqual([expect.objectContaining({msg: 'front door: haproxy', front: 'haproxy', setting: 'auto'})])
    } finally {
      await auto.stop()
    }
    expect(await readHostInfo(host.dataDir)).toMatchObject({front: 'haproxy'})
  })

  test('goes with `host serve` when the host is killed', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-front-'))
    try {
      const child = spawn(process.execPath, [CLI_BIN, 'host', 'serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
        env: {
          ...process.env,
          EDGEWORKERS_DATA_DIR: undefined,
          EDGEWORKERS_HOST__SHARDS: '1',
          EDGEWORKERS_HOST__FRONT: 'haproxy',
          EDGEWORKERS_LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      })
      let stderr = ''
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      const info = await until(
        () => {
          if (child.exitCode !== null) throw new Error(`host serve exited ${child.exitCode}: ${stderr}`)
          try {
            return JSON.parse(readFileSync(path.join(dataDir, 'host.json'), 'utf8')) as {publicUrl: string}
          } catch {
            return null
          }
        },
        'host serve to start',
        60_000,
      )
      expect((await get(`${info.publicUrl}/livez`)).status).toBe(200)
      expect(haproxyPids(dataDir)).toHaveLength(1)
      child.kill('SIGKILL')
      await until(() => haproxyPids(dataDir).length === 0, 'haproxy to go with its host')
    } finally {
      rmSync(dataDir, {recursive: true, force: true})
    }
  })
})
