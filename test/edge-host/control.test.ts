// Per-Worker control state: secrets and service-account credentials (bound into the Worker, purged
// on retirement), receipts that make control calls idempotent, egress limits and metrics.
import {existsSync} from 'node:fs'
import path from 'node:path'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {paths} from '../support/paths.js'
import {sha256Hex} from '../../src/canonical-json.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {moduleUpload, scriptNameFor} from '../support/worker-fixtures.js'

let host: TestHost
let client: HostClient
const name = scriptNameFor('control/env')

/** Answers with the names of its env bindings and the values of TOKEN and SERVICE_ACCOUNTS. */
const envWorker = moduleUpload(
  `export default {
  fetch(request, env) {
    return Response.json({names: Object.keys(env).sort(), token: env.TOKEN ?? null, accounts: env.SERVICE_ACCOUNTS ?? null})
  },
}`,
  {bindings: [{type: 'plain_text', name: 'GREETING', text: 'hi'}]},
)

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 1}})
  await host.pair()
  client = host.client()
  await client.deploy(name, envWorker)
})

afterAll(async () => {
  await host?.stop()
})

async function env(): Promise<{names: string[]; token: string | null; accounts: Record<string, {username: string; password: string}> | null}> {
  return (await (await fetch(`${host.publicUrl}/${name}/`)).json()) as never
}

describe('secrets', () => {
  test('put: bound into the Worker; read back as name and digest only', async () => {
    const put = await client.call('PUT', paths.secret(name, 'TOKEN'), {value: 's3cret'})
    expect(put.body).toMatchObject({conflict: false, current: {name: 'TOKEN', sha256: sha256Hex('s3cret')}})
    await expect.poll(async () => (await env()).token, {timeout: 15_000}).toBe('s3cret')
    const listed = await client.call('GET', paths.secrets(name))
    expect(listed.body).toEqual({secrets: [{name: 'TOKEN', sha256: sha256Hex('s3cret'), updated_at: expect.any(String)}]})
    expect(listed.text).not.toContain('s3cret')
  })

  test('a secret cannot shadow a binding, nor a binding a secret', async () => {
    expect((await client.call('PUT', paths.secret(name, 'GREETING'), {value: 'x'})).body.code).toBe('binding_name_taken')
    const shadowing = await client.call(
      'PUT',
      paths.script(name),
      moduleUpload('export default {fetch() {return new Response("x")}}', {
        bindings: [{type: 'plain_text', name: 'TOKEN', text: 'x'}],
      }),
    )
    expect(shadowing.body.code).toBe('binding_name_taken')
  })

  test('delete by name, then purge', async () => {
    await client.call('PUT', paths.secret(name, 'OTHER'), {value: 'o'})
    expect((await client.call('DELETE', paths.secret(name, 'OTHER'))).body).toMatchObject({deleted: true, current: {name: 'OTHER', deleted: true}})
    expect((await client.call('DELETE', paths.secret(name, 'OTHER'))).body).toMatchObject({deleted: false})
    expect((await client.call('DELETE', paths.secrets(name))).body).toMatchObject({current: {purged: ['TOKEN']}})
    expect((await client.call('GET', paths.secrets(name))).body).toEqual({secrets: []})
    await expect.poll(async () => (await env()).token, {timeout: 15_000}).toBeNull()
    expect((await env()).names).toEqual(['GREETING'])
  })
})

describe('service-account credentials', () => {
  test('put, read back without the password, purge', async () => {
    const put = await client.call('PUT', paths.serviceAccount(name, 'sa-1'), {username: 'robot', password: 'pa55'})
    expect(put.body).toMatchObject({current: {serviceAccountId: 'sa-1', username: 'robot', passwordDigest: sha256Hex('pa55')}})
    await expect.poll(async () => (await env()).accounts, {timeout: 15_000}).toEqual({'sa-1': {username: 'robot', password: 'pa55'}})
    const listed = await client.call('GET', paths.serviceAccounts(name))
    expect(listed.text).not.toContain('pa55')
    expect((await client.call('DELETE', paths.serviceAccounts(name))).body).toMatchObject({current: {purged: ['sa-1']}})
    await expect.poll(async () => (await env()).accounts, {timeout: 15_000}).toBeNull()
  })
})

describe('receipts', () => {
  test('a control call with a mutation id is applied once and leaves a receipt', async () => {
    const command = {mode: 'teamsync_internal', ipAllowlist: ['127.0.0.1'], mutationId: 'mutation-1', commandDigest: sha256Hex('command-1')}
    const first = await client.call('PUT', paths.accessPolicy(name), command)
    expect(first.status).toBe(200)
    const again = await client.call('PUT', paths.accessPolicy(name), command)
    expect(again.body).toEqual(first.body)
    expect((await client.call('GET', paths.accessPolicy(name))).body.revision).toBe(first.body.current.revision)

    const conflicting = await client.call('PUT', paths.accessPolicy(name), {...command, commandDigest: sha256Hex('command-2')})
    expect(conflicting.status).toBe(409)
    expect(conflicting.body.code).toBe('mutation_conflict')

    const receipt = await client.call('GET', paths.receipt('mutation-1', command.commandDigest))
    expect(receipt.body).toMatchObject({
      mutationId: 'mutation-1',
      operation: 'access_policy.replace',
      scriptName: name,
      result: first.body,
      acknowledgedAt: null,
    })
    expect((await client.call('GET', paths.receipt('mutation-1', sha256Hex('command-2')))).body.code).toBe('mutation_conflict')
    expect((await client.call('POST', paths.receiptAck('mutation-1'))).body).toEqual({acknowledged: true})
    expect((await client.call('GET', paths.receipt('mutation-1', command.commandDigest))).body.acknowledgedAt).toEqual(expect.any(String))
    expect((await client.call('GET', paths.receipt('mutation-unknown', command.commandDigest))).status).toBe(404)
  })

  test('mutationId and commandDigest go together', async () => {
    const response = await client.call('POST', paths.lockdown(name), {mutationId: 'mutation-2'})
    expect(response.body).toMatchObject({code: 'invalid_request', message: expect.stringContaining('go together')})
  })
})

test("a retired script's Durable Object data is purged only when asked, never while it runs or under a fence", async () => {
  const keeper = scriptNameFor('control/data')
  await client.deploy(
    keeper,
    moduleUpload(
      `import {DurableObject} from "cloudflare:workers";
      export class Box extends DurableObject { put() { this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (v)"); return "stored" } }
      export default { fetch(request, env) { return env.BOX.get(env.BOX.idFromName("one")).put().then((text) => new Response(text)) } }`,
      {bindings: [{type: 'durable_object_namespace', name: 'BOX', className: 'Box'}]},
    ),
  )
  expect(await (await fetch(`${host.publicUrl}/${keeper}/`)).text()).toBe('stored')
  const data = path.join(host.dataDir, 'do', keeper)
  expect(existsSync(data)).toBe(true)
  expect((await client.call('POST', paths.purgeScriptData(keeper))).body).toMatchObject({code: 'script_not_retired'})
  expect((await client.call('POST', paths.retire(keeper))).status).toBe(200)
  // Retired, the data stays until the purge; under a fence the purge waits for the backup.
  expect(existsSync(data)).toBe(true)
  expect((await client.call('POST', paths.fence, {fenceId: 'purge-fence', ttlSeconds: 60})).status).toBe(201)
  expect((await client.call('POST', paths.purgeScriptData(keeper))).body).toMatchObject({code: 'edge_host_fenced'})
  expect((await client.call('POST', paths.fenceEnd('purge-fence'))).status).toBe(200)
  expect(existsSync(data)).toBe(true)
  expect((await client.call('POST', paths.purgeScriptData(keeper))).body).toEqual({purged: true})
  expect(existsSync(data)).toBe(false)
  expect((await client.call('POST', paths.purgeScriptData(keeper))).body).toEqual({purged: false})
})

test('Workers cannot reach private networks', async () => {
  const prober = scriptNameFor('control/egress')
  await client.deploy(
    prober,
    moduleUpload(`export default {
      async fetch() {
        try { await fetch(${JSON.stringify(`${host.adminUrl}/livez`)}); return new Response('reached') }
        catch (error) { return new Response('blocked: ' + error.message) }
      },
    }`),
  )
  expect(await (await fetch(`${host.publicUrl}/${prober}/`)).text()).toMatch(/^blocked: /)
})

test('metrics: requests by script and status, shard restarts, swap time, fence state, build info, stock process metrics', async () => {
  await fetch(`${host.publicUrl}/${scriptNameFor('control/unknown')}/`)
  const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
  expect(text).toMatch(new RegExp(`edgeworkers_host_requests_total\\{script="${name}",status="200"\\} \\d+`))
  expect(text).toMatch(/edgeworkers_host_requests_total\{script="unknown",status="404"\} \d+/)
  expect(text).toMatch(/edgeworkers_host_shard_restarts_total\{shard="0",reason="start"\} \d+/)
  // Under the loader (the default) a deploy loads the Worker into the running process: no restart.
  expect(text).toMatch(/edgeworkers_host_shard_swap_seconds_count\{reason="deploy",mode="load"\} \d+/)
  expect(text).toMatch(/edgeworkers_host_fence_active 0/)
  expect(text).toMatch(/edgeworkers_host_scripts\{state="active"\} \d+/)
  expect(text).toMatch(/edgeworkers_host_shard_up\{shard="0"\} 1/)
  expect(text).toMatch(/^edgeworkers_build_info\{version="[^"]+",node_version="[^"]+",workerd_version="1\.\d{8}\.\d+"\} 1$/m)
  expect(text).toMatch(/^process_resident_memory_bytes \d+$/m)
})

describe('control copy (docs/many-hosts.md)', () => {
  test('the whole state out, values included; written back exactly, revisions included, the Worker sees it when the PUT answers; refusals change nothing', async () => {
    const copy = {
      accessPolicy: {mode: 'public', apiKeySha256: null, apiKeyLastFour: null, ipAllowlist: [], revision: 7},
      runtimeConfig: {revision: 3, entries: [{key: 'limits', valueJson: '{"max":5}'}]},
      operationSettings: {settingsJson: null, releaseGeneration: null, revision: 2},
      secrets: [{name: 'TOKEN', value: 'copied-value'}],
      serviceAccounts: [{id: 'sa-9', username: 'robot', password: 'copied-password'}],
    }
    expect(await client.call('PUT', paths.controlCopy(name), copy)).toMatchObject({status: 200, body: {changed: true}})
    // Answered only once the shard serves the new env: no wait here.
    expect(await env()).toMatchObject({token: 'copied-value', accounts: {'sa-9': {username: 'robot', password: 'copied-password'}}})
    expect((await client.call('GET', paths.controlCopy(name))).body).toEqual(copy)
    expect((await client.call('GET', paths.accessPolicy(name))).body).toMatchObject({mode: 'public', revision: 7})
    expect(await client.call('PUT', paths.controlCopy(name), copy)).toMatchObject({status: 200, body: {changed: false}})

    expect((await client.call('PUT', paths.controlCopy(name), {...copy, secrets: 'x'})).status).toBe(400)
    expect((await client.call('PUT', paths.controlCopy(scriptNameFor('control/none')), copy)).body).toMatchObject({code: 'script_not_found'})
    const fence = await client.call('POST', paths.fence, {fenceId: 'copy-fence', ttlSeconds: 60})
    expect(fence.status).toBe(201)
    const fenced = await client.call('PUT', paths.controlCopy(name), {...copy, secrets: []})
    await client.call('POST', paths.fenceEnd('copy-fence'))
    expect(fenced.status).toBe(423)
    expect((await client.call('GET', paths.controlCopy(name))).body).toEqual(copy)
    await client.call('PUT', paths.controlCopy(name), {...copy, secrets: [], serviceAccounts: []})
  })
})
