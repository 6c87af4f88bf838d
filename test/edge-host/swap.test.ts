// Shard swaps under traffic, in both modes (hold: requests wait while a shard with Durable Objects
// gets its new workerd; overlap: the new workerd starts beside the old one), never dropping a
// request; deploys that arrive together share one restart; a workerd that dies is replaced while
// requests wait. Under the loader (code_loading = loader) a deploy of a Worker without Durable
// Objects loads it into the running process: no swap, its neighbours' WebSockets stay open, and the
// process is recycled once it holds too many replaced loads, and a burst of first loads after a
// start fails nothing; a process the host starts has each Worker on its own socket, and a redeploy
// then loads the new release into it all the same. The swap tests pin code_loading to "restart" (the loader is the default),
// the path Workers with Durable Objects take in either mode.
import {readdirSync, readFileSync, readlinkSync} from 'node:fs'
import path from 'node:path'
import {request, WebSocket} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {paths} from '../support/paths.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {fixtureUpload, moduleUpload, scriptNameFor, textWorker} from '../support/worker-fixtures.js'

/**
 * Redeploys `name` `count` times while requests for it and for `neighbour` keep coming (paced, so
 * the two cores are left for the swaps under test); every one must succeed.
 */
/** Deploys versions `first` … `first + count - 1` of `name` while traffic runs on it and on `neighbour`. */
async function redeployUnderTraffic(host: TestHost, client: HostClient, name: string, neighbour: string, count: number, first = 1) {
  const failures: string[] = []
  const seen = new Set<string>()
  let requests = 0
  let running = true
  const hammer = async (target: string) => {
    while (running) {
      try {
        const response = await request(`${host.publicUrl}/${target}/`)
        const text = await response.body.text()
        requests++
        if (response.statusCode !== 200) failures.push(`${response.statusCode} ${text}`)
        else seen.add(text)
      } catch (error) {
        failures.push(String(error))
      }
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
  }
  const clients = [hammer(name), hammer(neighbour)]
  try {
    const last = first + count - 1
    for (let version = first; version <= last; version++) await client.deploy(name, textWorker(`version ${version}`))
    // Traffic keeps going after the last swap until the last version has answered.
    await expect.poll(() => seen.has(`version ${last}`), {timeout: 10_000}).toBe(true)
  } finally {
    running = false
    await Promise.all(clients)
  }
  return {failures, seen, requests}
}

async function swapCount(host: TestHost, mode: 'hold' | 'overlap' | 'load', reason = 'deploy'): Promise<number> {
  const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
  return Number(new RegExp(`edgeworkers_host_shard_swap_seconds_count\\{reason="${reason}",mode="${mode}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0)
}

describe('a shard with Durable Objects: requests are held during each swap', () => {
  let host: TestHost
  let client: HostClient
  const redeployed = scriptNameFor('swap/redeployed')
  const counter = scriptNameFor('swap/counter')

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1, code_loading: 'restart'}})
    await host.pair()
    client = host.client()
    await client.deploy(counter, fixtureUpload('counter'))
    await client.deploy(redeployed, textWorker('version 0'))
  })

  afterAll(async () => {
    await host?.stop()
  })

  test('20 redeploys of the same shard fail no request', async () => {
    const {failures, seen, requests} = await redeployUnderTraffic(host, client, redeployed, counter, 20)
    expect(failures).toEqual([])
    expect(requests).toBeGreaterThan(40)
    expect([...seen].some((text) => text.startsWith('{"name":"default"'))).toBe(true)
    expect(await swapCount(host, 'hold')).toBeGreaterThanOrEqual(20)
  }, 120_000)

  test('a workerd that dies is replaced, and requests meanwhile wait for it', async () => {
    const restarts = (await client.call('GET', paths.inventory)).body.shards[0].restarts as number
    const [record] = readdirSync(path.join(host.dataDir, 'runtime', 'pids')).filter((file) => file.startsWith('shard-0.'))
    const pid = Number(path.extname(record!).slice(1))
    process.kill(pid, 'SIGKILL')
    const responses = await Promise.all(Array.from({length: 5}, () => fetch(`${host.publicUrl}/${redeployed}/`).then((response) => response.text())))
    expect(responses).toEqual(Array(5).fill('version 20'))
    const inventory = (await client.call('GET', paths.inventory)).body
    expect(inventory.shards[0].restarts).toBeGreaterThan(restarts)
    const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
    expect(metrics).toMatch(/edgeworkers_host_shard_restarts_total\{shard="0",reason="crash"\} 1/)
  })
})

describe('a shard without Durable Objects: the new process starts beside the old one', () => {
  let host: TestHost
  let client: HostClient
  const redeployed = scriptNameFor('swap/stateless')
  const neighbour = scriptNameFor('swap/neighbour')

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1, code_loading: 'restart'}})
    await host.pair()
    client = host.client()
    await client.deploy(neighbour, textWorker('neighbour'))
    await client.deploy(redeployed, textWorker('version 0'))
  })

  afterAll(async () => {
    await host?.stop()
  })

  test('10 redeploys fail no request', async () => {
    const {failures, seen} = await redeployUnderTraffic(host, client, redeployed, neighbour, 10)
    expect(failures).toEqual([])
    expect(seen).toContain('neighbour')
    expect(await swapCount(host, 'overlap')).toBeGreaterThanOrEqual(10)
    expect(await swapCount(host, 'hold')).toBe(0)
  }, 120_000)
})

describe('coalescing', () => {
  let host: TestHost
  let client: HostClient

  beforeAll(async () => {
    // A wide window, so the uploads below certainly land inside it.
    host = await startTestHost({settings: {shards: 1, coalesce_window_ms: 3_000, code_loading: 'restart'}})
    await host.pair()
    client = host.client()
  })

  afterAll(async () => {
    await host?.stop()
  })

  test('deploys arriving together share one shard restart', async () => {
    const restarts = (await client.call('GET', paths.inventory)).body.shards[0].restarts as number
    const uploads = Array.from({length: 4}, (_, index) => ({name: scriptNameFor(`coalesce/${index}`), upload: textWorker(`coalesced ${index}`)}))
    await Promise.all(uploads.map(({name, upload}) => client.upload(name, upload)))
    await Promise.all(uploads.map(({name, upload}) => client.waitLive(name, upload.releaseGeneration)))
    expect((await client.call('GET', paths.inventory)).body.shards[0].restarts).toBe(restarts + 1)
    for (const {name} of uploads) expect(await (await fetch(`${host.publicUrl}/${name}/`)).text()).toMatch(/^coalesced \d$/)
  })
})

/** Echoes WebSocket messages; answers plain requests with `text`. */
function echoWorker(text: string) {
  return moduleUpload(`export default { fetch(request) {
    if (request.headers.get("upgrade") !== "websocket") return new Response(${JSON.stringify(text)});
    const [client, server] = Object.values(new WebSocketPair());
    server.accept();
    server.addEventListener("message", (event) => server.send(event.data));
    return new Response(null, {status: 101, webSocket: client});
  } }`)
}

function shardPid(host: TestHost): number {
  const [record] = readdirSync(path.join(host.dataDir, 'runtime', 'pids')).filter((file) => file.startsWith('shard-0.'))
  return Number(path.extname(record!).slice(1))
}

describe('the loader: a deploy loads the Worker into the running process', () => {
  let host: TestHost
  let client: HostClient
  const redeployed = scriptNameFor('loader/redeployed')
  const neighbour = scriptNameFor('loader/neighbour')
  const counter = scriptNameFor('loader/counter')

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1, code_loading: 'loader', loader_max_stale_loads: 12}})
    await host.pair()
    client = host.client()
    await client.deploy(counter, fixtureUpload('counter'))
    await client.deploy(neighbour, echoWorker('neighbour'))
    await client.deploy(redeployed, textWorker('version 0'))
  })

  afterAll(async () => {
    await host?.stop()
  })

  test('10 redeploys fail no request, swap no process and close no neighbour WebSocket', async () => {
    const pid = shardPid(host)
    const swaps = (await swapCount(host, 'overlap')) + (await swapCount(host, 'hold'))
    const socket = new WebSocket(`${host.publicUrl.replace('http', 'ws')}/${neighbour}/`)
    const echoes: string[] = []
    let closed = false
    socket.addEventListener('message', (event) => echoes.push(String(event.data)))
    socket.addEventListener('close', () => {
      closed = true
    })
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve)
      socket.addEventListener('error', reject)
    })

    const {failures, seen} = await redeployUnderTraffic(host, client, redeployed, neighbour, 10)
    expect(failures).toEqual([])
    expect(seen).toContain('neighbour')
    socket.send('still open')
    await expect.poll(() => echoes).toEqual(['still open'])
    expect(closed).toBe(false)
    socket.close()
    expect(shardPid(host)).toBe(pid)
    expect((await swapCount(host, 'overlap')) + (await swapCount(host, 'hold'))).toBe(swaps)
    expect(await swapCount(host, 'load')).toBeGreaterThanOrEqual(10)
    // The Durable Object neighbour kept its process, and so its in-memory state.
    const counted = await (await fetch(`${host.publicUrl}/${counter}/`)).json()
    expect(counted).toMatchObject({name: 'default'})
  }, 120_000)

  test('past loader_max_stale_loads replaced loads the process is recycled under traffic, failing no request, and serves the current code', async () => {
    const pid = shardPid(host)
    // The recycle is an overlap swap: the data plane moves to the new process once it listens and the
    // old one finishes what it holds, so no request fails without a hand-over of the listening socket.
    const {failures, seen} = await redeployUnderTraffic(host, client, redeployed, neighbour, 3, 11)
    expect(failures).toEqual([])
    expect(seen).toContain('neighbour')
    await expect.poll(() => shardPid(host), {timeout: 30_000}).not.toBe(pid)
    const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
    expect(metrics).toMatch(/edgeworkers_host_shard_restarts_total\{shard="0",reason="recycle"\} 1/)
    expect(await (await fetch(`${host.publicUrl}/${redeployed}/`)).text()).toBe('version 13')
    expect(await (await fetch(`${host.publicUrl}/${neighbour}/`)).text()).toBe('neighbour')
  }, 60_000)
})

describe('the loader after a start: a burst of first requests', () => {
  let host: TestHost
  let client: HostClient
  const names = Array.from({length: 40}, (_, index) => scriptNameFor(`loader/burst-${index}`))

  beforeAll(async () => {
    // A tight CPU limit: a process that queued every first load at once would answer nothing for
    // longer than that, and the watchdog would take it for a runaway (the 502s this reproduces).
    host = await startTestHost({settings: {shards: 2, code_loading: 'loader', request_cpu_limit_ms: 200, watchdog_interval_ms: 50}})
    await host.pair()
    client = host.client()
    await Promise.all(names.map((name, index) => client.deploy(name, textWorker(`burst ${index}`))))
  }, 120_000)

  afterAll(async () => {
    await host?.stop()
  })

  test('after each of two restarts, 40 Workers asked at once all answer 200, and no shard is taken for a runaway', async () => {
    for (let round = 0; round < 2; round++) {
      await host.restart()
      const answers = await Promise.all(names.map(async (name) => (await fetch(`${host.publicUrl}/${name}/`)).text()))
      expect(answers).toEqual(names.map((_, index) => `burst ${index}`))
      const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
      expect(metrics).not.toMatch(/^edgeworkers_host_(shard_restarts_total\{[^}]*reason="runaway"|worker_incidents_total\{)/m)
    }
  }, 120_000)
})

describe('the loader after a start: every Worker on its own socket', () => {
  let host: TestHost
  let client: HostClient
  const names = [scriptNameFor('loader/own-socket-a'), scriptNameFor('loader/own-socket-b')]

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1, code_loading: 'loader'}})
    await host.pair()
    client = host.client()
    for (const name of names) await client.deploy(name, textWorker(`${name} 1`))
  }, 60_000)

  afterAll(async () => {
    await host?.stop()
  })

  test('deployed into a running process they go through its loader; after a restart each has its own socket; a redeploy loads and a retirement unroutes without a swap', async () => {
    // health and the loader's socket: the two Workers were loaded into the process.
    expect(listeningSockets(shardPid(host))).toBe(2)
    await host.restart()
    expect(await Promise.all(names.map(async (name) => (await fetch(`${host.publicUrl}/${name}/`)).text()))).toEqual(names.map((name) => `${name} 1`))
    const pid = shardPid(host)
    // health, the loader, worker-counts (the Workers nobody tails count there) and one per Worker.
    expect(listeningSockets(pid)).toBe(3 + names.length)
    await client.deploy(names[0]!, textWorker(`${names[0]} 2`))
    expect(await (await fetch(`${host.publicUrl}/${names[0]}/`)).text()).toBe(`${names[0]} 2`)
    expect(await (await fetch(`${host.publicUrl}/${names[1]}/`)).text()).toBe(`${names[1]} 1`)
    expect(shardPid(host)).toBe(pid)
    expect(await swapCount(host, 'load')).toBe(1)
    // Retiring a Worker the process started with takes its route, not the process.
    await client.call('POST', paths.retire(names[1]!))
    const retired = await fetch(`${host.publicUrl}/${names[1]}/`)
    expect(retired.status).toBe(404)
    expect(await retired.json()).toMatchObject({code: 'worker_not_found'})
    expect(shardPid(host)).toBe(pid)
    expect((await swapCount(host, 'overlap')) + (await swapCount(host, 'hold'))).toBe(0)
  }, 120_000)
})

describe('the loader: once deploys settle, the Workers get their own sockets', () => {
  let host: TestHost
  let client: HostClient
  const names = [scriptNameFor('loader/settled-a'), scriptNameFor('loader/settled-b')]

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1, code_loading: 'loader', loader_settle_seconds: 1}})
    await host.pair()
    client = host.client()
  }, 60_000)

  afterAll(async () => {
    await host?.stop()
  })

  test('Workers deployed into a running process go through its loader, then a swap with nothing held puts each on its own socket; so after a crash', async () => {
    const started = shardPid(host)
    for (const name of names) await client.deploy(name, textWorker(`${name} 1`))
    expect(await swapCount(host, 'load')).toBe(names.length)
    // Settled: the replaced process stopped once its requests were done, and the one left listens on
    // health, the loader, worker-counts and one socket per Worker. (On a loaded machine the second deploy
    // may come a settle period after the first: then the shard settles twice.)
    const shardPids = () => readdirSync(path.join(host.dataDir, 'runtime', 'pids')).filter((file) => file.startsWith('shard-0.'))
    const settledSockets = () => (shardPids().length === 1 ? listeningSockets(shardPid(host)) : 0)
    await expect.poll(settledSockets, {timeout: 30_000}).toBe(3 + names.length)
    const pid = shardPid(host)
    expect(pid).not.toBe(started)
    const settles = await swapCount(host, 'overlap', 'settle')
    expect(settles).toBeGreaterThanOrEqual(1)
    expect(await Promise.all(names.map(async (name) => (await fetch(`${host.publicUrl}/${name}/`)).text()))).toEqual(names.map((name) => `${name} 1`))
    expect(await swapCount(host, 'hold', 'settle')).toBe(0)

    // A crash's replacement (the spare process, which has no Worker of its own) leaves them to its loader; they settle again.
    process.kill(pid, 'SIGKILL')
    expect(await Promise.all(names.map(async (name) => (await fetch(`${host.publicUrl}/${name}/`)).text()))).toEqual(names.map((name) => `${name} 1`))
    await expect.poll(() => swapCount(host, 'overlap', 'settle'), {timeout: 30_000}).toBe(settles + 1)
    await expect.poll(settledSockets, {timeout: 30_000}).toBe(3 + names.length)
  }, 120_000)

  test('no settle while a WebSocket is open (the swap would cut it); once it closes, the shard settles', async () => {
    const echo = scriptNameFor('loader/settled-echo')
    const before = await swapCount(host, 'overlap', 'settle')
    await client.deploy(echo, echoWorker('echo'))
    await expect.poll(() => swapCount(host, 'overlap', 'settle'), {timeout: 30_000}).toBe(before + 1)
    const socket = new WebSocket(`${host.publicUrl.replace('http', 'ws')}/${echo}/`)
    const echoes: string[] = []
    socket.addEventListener('message', (event) => echoes.push(String(event.data)))
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve)
      socket.addEventListener('error', reject)
    })
    await client.deploy(names[0]!, textWorker(`${names[0]} 2`))
    // Four settle periods: each asks again and finds the WebSocket, older than a second, inside.
    await new Promise((resolve) => setTimeout(resolve, 4_000))
    expect(await swapCount(host, 'overlap', 'settle')).toBe(before + 1)
    socket.send('still open')
    await expect.poll(() => echoes).toEqual(['still open'])
    socket.close()
    await expect.poll(() => swapCount(host, 'overlap', 'settle'), {timeout: 30_000}).toBe(before + 2)
    expect(await (await fetch(`${host.publicUrl}/${names[0]}/`)).text()).toBe(`${names[0]} 2`)
  }, 120_000)
})

/** Unix sockets the process listens on (its health, loader and Worker sockets). */
function listeningSockets(pid: number): number {
  // A connection's descriptor may close between the listing and the read: it is no listener anyway.
  const link = (fd: string) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`)
    } catch {
      return ''
    }
  }
  const inodes = new Set(readdirSync(`/proc/${pid}/fd`).map((fd) => /^socket:\[(\d+)\]$/.exec(link(fd))?.[1]))
  // /proc/net/unix: Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is a listening socket.
  return readFileSync('/proc/net/unix', 'utf8')
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[3] === '00010000' && inodes.has(fields[6])).length
}
