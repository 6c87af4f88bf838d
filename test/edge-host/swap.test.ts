// Shard swaps under traffic, in both modes (hold: requests wait while a shard with Durable Objects
// gets its new workerd; overlap: the new workerd starts beside the old one), never dropping a
// request; deploys that arrive together share one restart; a workerd that dies is replaced while
// requests wait.
import {readdirSync} from 'node:fs'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {paths} from '../support/paths.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {fixtureUpload, scriptNameFor, textWorker} from '../support/worker-fixtures.js'

/**
 * Redeploys `name` `count` times while requests for it and for `neighbour` keep coming (paced, so
 * the two cores are left for the swaps under test); every one must succeed.
 */
async function redeployUnderTraffic(host: TestHost, client: HostClient, name: string, neighbour: string, count: number) {
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
    for (let version = 1; version <= count; version++) await client.deploy(name, textWorker(`version ${version}`))
    // Traffic keeps going after the last swap until the last version has answered.
    await expect.poll(() => seen.has(`version ${count}`), {timeout: 10_000}).toBe(true)
  } finally {
    running = false
    await Promise.all(clients)
  }
  return {failures, seen, requests}
}

async function swapCount(host: TestHost, mode: 'hold' | 'overlap'): Promise<number> {
  const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
  return Number(new RegExp(`edgeworkers_host_shard_swap_seconds_count\\{reason="deploy",mode="${mode}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0)
}

describe('a shard with Durable Objects: requests are held during each swap', () => {
  let host: TestHost
  let client: HostClient
  const redeployed = scriptNameFor('swap/redeployed')
  const counter = scriptNameFor('swap/counter')

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1}})
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
    host = await startTestHost({settings: {shards: 1}})
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
    host = await startTestHost({settings: {shards: 1, coalesce_window_ms: 3_000}})
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
