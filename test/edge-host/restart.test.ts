// A restarted host serves exactly what it served before: code, lockdowns, retirements, policies,
// shard assignments — from its SQLite state in the data dir. Also: host.json, health, one host per dir,
// and a stop that waiting readiness probes do not hold up.
import {randomBytes} from 'node:crypto'
import {readFileSync} from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {startHost} from '../../src/edge-host/host.js'
import {readHostInfo} from '../../src/edge-host/host-info.js'
import {STATE_FILE} from '../../src/edge-host/state/host-state.js'
import {READINESS_WAIT_MAX_MS} from '../../src/protocol/management-api.js'
import {paths} from '../support/paths.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {scriptNameFor, textWorker} from '../support/worker-fixtures.js'

let host: TestHost
let client: HostClient
const scripts = {
  active: Array.from({length: 4}, (_, index) => scriptNameFor(`restart/active-${index}`)),
  locked: scriptNameFor('restart/locked'),
  retired: scriptNameFor('restart/retired'),
  keyed: scriptNameFor('restart/keyed'),
}

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 3}})
  await host.pair()
  client = host.client()
  for (const [index, name] of scripts.active.entries()) await client.upload(name, textWorker(`active ${index}`))
  await client.upload(scripts.locked, textWorker('locked'))
  await client.upload(scripts.retired, textWorker('retired'))
  const keyed = textWorker('keyed')
  await client.deploy(scripts.keyed, keyed)
  await client.call('POST', paths.lockdown(scripts.locked))
  await client.call('POST', paths.retire(scripts.retired))
  await client.call('PUT', paths.accessPolicy(scripts.keyed), {mode: 'api_key', apiKeySha256: 'a'.repeat(64)})
  for (const name of scripts.active) await client.waitLive(name, (await client.call('GET', paths.script(name))).body.releaseGeneration)
})

afterAll(async () => {
  await host?.stop()
})

/** What the data plane answers for every script: status and body. */
async function observed(): Promise<Record<string, string>> {
  const all = [...scripts.active, scripts.locked, scripts.retired, scripts.keyed]
  const answers = await Promise.all(
    all.map(async (name) => {
      const response = await fetch(`${host.publicUrl}/${name}/`, {headers: {'x-request-id': '00000000-0000-4000-8000-000000000000'}})
      return [name, `${response.status} ${await response.text()}`] as const
    }),
  )
  return Object.fromEntries(answers)
}

/** The inventory without what a restart changes: the time, restart counts, and what each shard has loaded (a retired script leaves it at the shard's next swap). */
function withoutVolatile(inventory: {generatedAt: string; shards: Array<{index: number; state: string}>}) {
  return {...inventory, generatedAt: undefined, shards: inventory.shards.map((shard) => ({index: shard.index, state: shard.state}))}
}

test('serves the same after a restart', async () => {
  const before = await observed()
  expect(Object.values(before).filter((answer) => answer.startsWith('200 active')).length).toBe(4)
  expect(before[scripts.locked]).toBe('403 {"code":"worker_retired","message":"Forbidden"}')
  expect(before[scripts.retired]).toMatch(/^404 /)
  expect(before[scripts.keyed]).toBe('403 {"code":"access_denied","message":"Forbidden"}')
  const inventoryBefore = (await client.call('GET', paths.inventory)).body

  await host.restart()
  expect(host.host.ready()).toBe(true)
  expect(await observed()).toEqual(before)
  expect(withoutVolatile((await client.call('GET', paths.inventory)).body)).toEqual(withoutVolatile(inventoryBefore))
})

test('host.json names the running host; health answers on both listeners', async () => {
  const info = await readHostInfo(host.dataDir)
  expect(info).toMatchObject({pid: process.pid, publicUrl: host.publicUrl, adminUrl: host.adminUrl, scope: expect.stringMatching(/^onprem:/)})
  expect(JSON.parse(readFileSync(path.join(host.dataDir, 'host.json'), 'utf8')).adminUrl).toBe(host.adminUrl)
  for (const base of [host.publicUrl, host.adminUrl]) {
    expect((await fetch(`${base}/livez`)).status).toBe(200)
    const ready = await fetch(`${base}/readyz`)
    expect(ready.status).toBe(200)
    expect(await ready.json()).toMatchObject({ready: true, shards: [{state: 'up'}, {state: 'up'}, {state: 'up'}]})
  }
})

test('a second host on the same data dir is refused', async () => {
  await expect(startHost({dataDir: host.dataDir, settings: {listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0'}})).rejects.toThrow(
    /another edge host .* is running/,
  )
  // The refusal left the running host alone.
  expect((await client.call('GET', paths.inventory)).status).toBe(200)
})

test('lowering the shard count moves scripts onto the remaining shards', async () => {
  await host.restart({shards: 1})
  const inventory = (await client.call('GET', paths.inventory)).body
  expect(inventory.shards).toHaveLength(1)
  for (const script of inventory.scripts) if (script.state !== 'retired') expect(script.shard).toBe(0)
  for (const [index, name] of scripts.active.entries()) expect(await (await fetch(`${host.publicUrl}/${name}/`)).text()).toBe(`active ${index}`)
})

test('a stopping host answers a readiness probe that waits for a swap, rather than holding it', async () => {
  // A long coalescing window keeps the uploaded release stored but not live while the probe waits
  // (a swap's window: under the loader a release loads at once).
  const waiting = await startTestHost({settings: {shards: 1, coalesce_window_ms: 3_000, code_loading: 'restart'}})
  try {
    await waiting.pair()
    const name = scriptNameFor('restart/probe-at-stop')
    const release = textWorker('never live')
    await waiting.client().upload(name, release)
    const nonce = randomBytes(16).toString('hex')
    const probe = waiting.client().call('GET', paths.readinessProbe(name, release.releaseGeneration, READINESS_WAIT_MAX_MS), undefined, {nonce})
    // The probe is inside the host (signed and parsed) once the nonce it used is spent: wait for that.
    await nonceSpent(waiting.dataDir, nonce)
    const stopped = waiting.stop()
    const answer = await probe
    expect(answer.status).toBe(409)
    expect(answer.body.code).toBe('script_not_ready')
    await stopped
  } finally {
    await waiting.stop()
  }
})

/** Resolves once the host recorded `nonce` in its state (it does so right after checking the signature). */
async function nonceSpent(dataDir: string, nonce: string): Promise<void> {
  const state = new Database(path.join(dataDir, STATE_FILE), {readonly: true})
  try {
    const deadline = Date.now() + 30_000
    while (!state.prepare('SELECT 1 FROM nonces WHERE nonce = ?').get(nonce)) {
      if (Date.now() > deadline) throw new Error(`the host never recorded nonce ${nonce}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  } finally {
    state.close()
  }
}
