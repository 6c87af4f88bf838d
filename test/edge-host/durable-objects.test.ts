// Durable Object storage lives on the host's disk (<data dir>/do/<script>/): the counter fixture's
// value survives a redeploy, a host restart and retirement.
import {readdirSync} from 'node:fs'
import path from 'node:path'
import {deserialize} from 'node:v8'
import Database from 'better-sqlite3'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {paths} from '../support/paths.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {fixtureUpload, scriptNameFor} from '../support/worker-fixtures.js'

let host: TestHost
let client: HostClient
const name = scriptNameFor('durable-objects/counter')

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 1}})
  await host.pair()
  client = host.client()
  await client.deploy(name, fixtureUpload('counter'))
})

afterAll(async () => {
  await host?.stop()
})

async function counter(method: 'GET' | 'POST', counterName = 'visits'): Promise<{status: number; value?: number}> {
  const response = await fetch(`${host.publicUrl}/${name}/?name=${counterName}`, {method})
  if (response.status !== 200) return {status: response.status}
  return {status: 200, value: ((await response.json()) as {value: number}).value}
}

/** The counter's stored value, read straight from workerd's SQLite files on disk. */
function valueOnDisk(): Array<number | null> {
  const dir = path.join(host.dataDir, 'do', name, `${name}:Counter`)
  return readdirSync(dir)
    .filter((file) => file.endsWith('.sqlite') && file !== 'metadata.sqlite')
    .map((file) => {
      const db = new Database(path.join(dir, file), {readonly: true})
      try {
        // Objects that were only read have no key-value table.
        if (!db.prepare(`SELECT 1 FROM sqlite_master WHERE name = '_cf_KV'`).get()) return null
        const row = db.prepare(`SELECT value FROM _cf_KV WHERE key = 'value'`).get() as {value: Buffer}
        return deserialize(row.value) as number
      } finally {
        db.close()
      }
    })
}

test('counts', async () => {
  expect(await counter('POST')).toEqual({status: 200, value: 1})
  expect(await counter('POST')).toEqual({status: 200, value: 2})
  expect(await counter('GET')).toEqual({status: 200, value: 2})
  expect(await counter('GET', 'other')).toEqual({status: 200, value: 0})
})

test('the value survives a redeploy', async () => {
  const changed = fixtureUpload('counter', {tags: ['redeployed']})
  const source = `${Buffer.from(changed.modules[0]!.contentBase64, 'base64').toString()}\n// redeployed\n`
  const redeploy = fixtureUpload('counter', {modules: [{name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')}]})
  await client.deploy(name, redeploy)
  expect((await client.call('GET', paths.script(name))).body.liveReleaseGeneration).toBe(redeploy.releaseGeneration)
  expect(await counter('POST')).toEqual({status: 200, value: 3})
})

test('the value survives a host restart', async () => {
  await host.restart()
  expect(await counter('GET')).toEqual({status: 200, value: 3})
  expect(await counter('POST')).toEqual({status: 200, value: 4})
})

test('retirement keeps the data on disk', async () => {
  expect((await client.call('POST', paths.retire(name))).body.state).toBe('retired')
  expect(await counter('GET')).toEqual({status: 404})
  // The shard drops the script once it restarts; the files stay.
  await expect.poll(async () => (await client.call('GET', paths.inventory)).body.shards[0].scripts).toBe(0)
  await host.restart()
  expect(await counter('GET')).toEqual({status: 404})
  expect(valueOnDisk()).toContain(4)
})
