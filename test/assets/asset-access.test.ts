// An asset URL is a Worker URL: the host checks retirement, lockdown and the access policy before it
// answers from a release's assets, so a refused client gets from an asset URL exactly what it gets
// from a URL the Worker would answer (same status, headers that matter, body) — real host, real
// workerd, the real CLI.
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {request} from 'undici'
import {expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine} from '../../src/engine/context.js'
import {requireProvider} from '../../src/engine/provider.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {openStore} from '../../src/store/index.js'
import {kitWithHost} from '../support/cli-kit.js'

const kit = kitWithHost('asset-access', {settings: {shards: 1}})
const {cli, project, deploy} = kit

/** What a client can tell two answers apart by; the request id is each request's own. */
async function answer(url: string, headers: Record<string, string> = {}) {
  const response = await request(url, {headers})
  const body = (await response.body.text()).replace(/"requestId":"[0-9a-f-]{36}"/, '"requestId":"…"')
  return {status: response.statusCode, type: response.headers['content-type'], body}
}

test('an asset URL answers as the Worker does under an access policy that refuses the client, a lockdown, and after retirement', {
  timeout: 180_000,
}, async () => {
  const dir = project('guarded', {
    'wrangler.toml': 'name = "guarded"\nmain = "worker.js"\ncompatibility_date = "2026-11-01"\n[assets]\ndirectory = "public"\n',
    'worker.js': 'export default {fetch: (request) => new Response("worker " + new URL(request.url).pathname)}',
    'public/logo.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>',
  })
  const {url, department, script} = await deploy(dir)
  const asset = new URL('logo.svg', url).toString()
  const code = new URL('api/x', url).toString()
  expect(await answer(asset)).toMatchObject({status: 200, type: 'image/svg+xml', body: '<svg xmlns="http://www.w3.org/2000/svg"/>'})
  expect(await answer(code)).toMatchObject({status: 200, body: 'worker /api/x'})

  // teamsync_internal with no allowed address: nobody gets in.
  expect((await cli('access-policy', 'set', department, '--mode', 'teamsync_internal', '--json')).code).toBe(0)
  const deniedByAddress = await answer(code)
  expect(deniedByAddress).toEqual({status: 403, type: 'application/json', body: '{"code":"access_denied","message":"Forbidden"}'})
  expect(await answer(asset)).toEqual(deniedByAddress)

  // api_key: without the key refused as the Worker is; with it the asset is served.
  const keyFile = path.join(kit.root, 'api-key')
  expect((await cli('api-key', 'rotate', department, '--key-file', keyFile, '--json')).code).toBe(0)
  const apiKey = readFileSync(keyFile, 'utf8').trim()
  expect(await answer(asset)).toEqual(await answer(code))
  expect(await answer(asset, {'x-api-key': 'wrong'})).toEqual(deniedByAddress)
  expect(await answer(asset, {'x-api-key': apiKey})).toMatchObject({status: 200, type: 'image/svg+xml'})

  // Lockdown (retirement's first step), told to the host through the provider as retire tells it.
  const settings = settingsSchema.parse({data_dir: kit.dataDir})
  const store = await openStore(settings)
  try {
    const engine = await createEngine(store, settings, onPremHosts)
    await (await requireProvider(engine, 'lock the Worker down')).provider.lockdownScript(script)
  } finally {
    await store.close()
  }
  const locked = await answer(code, {'x-api-key': apiKey})
  expect(locked).toEqual({status: 403, type: 'application/json', body: '{"code":"worker_retired","message":"Forbidden"}'})
  expect(await answer(asset, {'x-api-key': apiKey})).toEqual(locked)
  expect(await answer(asset)).toEqual(locked)

  // Retired: the exact 404 of a Worker that never existed.
  expect((await cli('retire', department, '--yes', '--json')).code).toBe(0)
  const never = await answer(`${kit.host.publicUrl}/dw-${'0'.repeat(48)}/logo.svg`)
  expect(never).toEqual({status: 404, type: 'application/json', body: '{"code":"worker_not_found","message":"Worker not found","requestId":"…"}'})
  expect(await answer(asset, {'x-api-key': apiKey})).toEqual(never)
  expect(await answer(code)).toEqual(never)
})
