// The edge host's data snapshot (GET /v1/snapshot) against a real host running real workerd: refused
// unless the named fence is the active one, and otherwise a tar of exactly the state, the identity
// key and the Durable Object files — each SQLite file a consistent copy, the fence lifted in the copy.
import {existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {deserialize} from 'node:v8'
import Database from 'better-sqlite3'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {extractSnapshot, readSnapshotManifest} from '../../src/engine/backup/host-snapshot.js'
import {fileDigest} from '../../src/file-digest.js'
import {paths} from '../support/paths.js'
import {OnPremProvider} from '../../src/provider/onprem/client.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {fixtureUpload, scriptNameFor} from '../support/worker-fixtures.js'

let host: TestHost
let client: HostClient
const scratch = mkdtempSync(path.join(tmpdir(), 'edgeworkers-snapshot-test-'))
const name = scriptNameFor('backup/snapshot-counter')

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 1}})
  await host.pair()
  client = host.client()
  await client.deploy(name, fixtureUpload('counter'))
  for (let i = 0; i < 2; i++) expect((await fetch(`${host.publicUrl}/${name}/?name=visits`, {method: 'POST'})).status).toBe(200)
})

afterAll(async () => {
  await host?.stop()
  rmSync(scratch, {recursive: true, force: true})
})

test('refused unless the named fence is the active one, or unsigned', async () => {
  const provider = providerFor()
  const refusal = (fenceId: string) => provider.downloadSnapshot(fenceId, path.join(scratch, `refused-${fenceId}.tar`)).catch((error: unknown) => error)
  expect(await refusal('nightly-1')).toMatchObject({
    kind: 'terminal',
    code: 'edge_host_fence_required',
    status: 409,
    message: expect.stringContaining('fence nightly-1 is not active; a data snapshot needs it'),
  })
  expect((await client.call('POST', paths.fence, {fenceId: 'nightly-1', ttlSeconds: 60, reason: 'test'})).status).toBe(201)
  try {
    expect(await refusal('nightly-0')).toMatchObject({status: 409, message: expect.stringContaining('the active fence is nightly-1, not nightly-0')})
    expect((await client.call('GET', paths.snapshot('nightly-1'), undefined, {sign: false})).status).toBe(401)
  } finally {
    await client.call('POST', paths.fenceEnd('nightly-1'))
  }
  expect(await refusal('nightly-1')).toMatchObject({status: 409})
  // A refused download leaves no file.
  expect(existsSync(path.join(scratch, 'refused-nightly-1.tar'))).toBe(false)
})

test('a fenced host answers a tar of its state, identity and Durable Object files, serving all along', async () => {
  const tarFile = path.join(scratch, 'snapshot.tar')
  expect((await client.call('POST', paths.fence, {fenceId: 'nightly-2', ttlSeconds: 60, reason: 'test'})).status).toBe(201)
  let download: {size: number; sha256: string}
  try {
    const serving = fetch(`${host.publicUrl}/${name}/?name=visits`)
    download = await providerFor().downloadSnapshot('nightly-2', tarFile)
    // The data plane keeps serving while fenced.
    expect((await serving).status).toBe(200)
  } finally {
    await client.call('POST', paths.fenceEnd('nightly-2'))
  }
  expect(download).toEqual(await fileDigest(tarFile))
  expect(statSync(tarFile).mode & 0o777).toBe(0o600)

  const manifest = await readSnapshotManifest(tarFile)
  expect(manifest).toMatchObject({formatVersion: 1, fenceId: 'nightly-2', scope: host.host.scope, fingerprint: host.host.fingerprint})
  const files = manifest.files.map((file) => file.path)
  expect(files.slice(0, 2)).toEqual(['host.sqlite', 'identity.key'])
  expect(files.length).toBeGreaterThan(2)
  expect(files.slice(2).every((file) => file.startsWith(`do/${name}/`) && file.endsWith('.sqlite'))).toBe(true)
  // The staging area is gone once the answer is sent.
  await expect.poll(() => readdirSync(path.join(host.dataDir, 'runtime', 'snapshots'))).toEqual([])

  const dataDir = path.join(scratch, 'restored')
  mkdirSync(dataDir, {mode: 0o700})
  await extractSnapshot(tarFile, dataDir, manifest)
  expect(readFileSync(path.join(dataDir, 'identity.key'), 'utf8')).toBe(readFileSync(path.join(host.dataDir, 'identity.key'), 'utf8'))
  const state = new Database(path.join(dataDir, 'host.sqlite'), {readonly: true})
  try {
    expect(state.prepare('SELECT name, release_generation AS generation FROM scripts').all()).toEqual([
      {name, generation: fixtureUpload('counter').releaseGeneration},
    ])
    // Lifted in the copy: a host started from it is not frozen.
    expect(state.prepare(`SELECT lift_reason AS reason FROM fences WHERE fence_id = 'nightly-2'`).get()).toEqual({reason: 'ended'})
  } finally {
    state.close()
  }
  const values = files
    .filter((file) => file.startsWith('do/') && !file.endsWith('/metadata.sqlite'))
    .map((file) => {
      const db = new Database(path.join(dataDir, file), {readonly: true})
      try {
        expect(db.pragma('integrity_check', {simple: true})).toBe('ok')
        const row = db.prepare(`SELECT value FROM _cf_KV WHERE key = 'value'`).get() as {value: Buffer} | undefined
        return row && (deserialize(row.value) as number)
      } finally {
        db.close()
      }
    })
  expect(values).toContain(2)
})

function providerFor(): OnPremProvider {
  return new OnPremProvider({baseUrl: host.adminUrl, scope: host.host.scope, secret: client.secret, connectTimeoutMs: 5_000, readTimeoutMs: 30_000})
}
