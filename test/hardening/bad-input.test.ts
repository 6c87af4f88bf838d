// Bad input is refused with one line naming what is wrong, and nothing is written (issue #15,
// finding 6): oversized, duplicate-key, invalid-UTF-8 and deeply nested manifests; a project
// whose files are small compressed but huge uncompressed; names with control characters; deep,
// duplicate-key and invalid-UTF-8 JSON on the management API; pairing codes guessed in a row.
import {generateKeyPairSync} from 'node:crypto'
import {cpSync, mkdtempSync, readdirSync, rmSync, truncateSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import {request} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {KitError} from '../../src/errors.js'
import {paths} from '../support/paths.js'
import {fingerprintOf, kitScopeFor} from '../../src/protocol/signing.js'
import {openStore, type Store} from '../../src/store/index.js'
import {runCli} from '../support/cli.js'
import {startTestHost, type HostClient, type TestHost} from '../support/host.js'
import {FIXTURES_DIR, scriptNameFor} from '../support/worker-fixtures.js'

let root: string
let dataDir: string
let store: Store
let engine: Engine
const department = 'dept-bad-input'

beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bad-input-'))
  dataDir = path.join(root, 'data')
  const settings = settingsSchema.parse({data_dir: dataDir})
  store = await openStore(settings)
  await store.migrate()
  // A recorded pairing: every refusal below happens at build, before the host is ever called.
  const publicKey = `${(generateKeyPairSync('ed25519').publicKey.export({format: 'jwk'}).x as string).replace(/-/g, '+').replace(/_/g, '/')}=`
  await store.kit.savePairing({
    scope: kitScopeFor(publicKey),
    host_url: 'http://127.0.0.1:9',
    host_fingerprint: fingerprintOf(publicKey),
    host_public_key: publicKey,
    shared_secret: 'a'.repeat(64),
  })
  await store.tenants.createCompany({id: 'acme', name: 'Acme'})
  await store.tenants.createDepartment({id: department, company_id: 'acme', name: 'Sales'})
  engine = await createEngine(store, settings, onPremHosts)
})

afterAll(async () => {
  await store?.close()
  rmSync(root, {recursive: true, force: true})
})

/** A copy of the hello fixture with `edgeworker.json` replaced by `manifest` (bytes or text). */
function project(manifest: string | Buffer, extra: (dir: string) => void = () => {}): string {
  const dir = mkdtempSync(path.join(root, 'project-'))
  cpSync(path.join(FIXTURES_DIR, 'hello'), dir, {recursive: true})
  writeFileSync(path.join(dir, 'edgeworker.json'), manifest)
  extra(dir)
  return dir
}

const HELLO = {name: 'hello', main: 'index.js', modules: ['index.js'], compatibilityDate: '2026-11-01', builderPolicy: 'department-worker-project-v2.9'}

function nothingWritten(): void {
  const db = new Database(path.join(dataDir, 'edgeworkers.sqlite'), {readonly: true})
  try {
    for (const table of ['edge_workers', 'edge_worker_versions', 'edge_worker_outbox']) {
      expect((db.prepare(`select count(*) as n from ${table}`).get() as {n: number}).n, table).toBe(0)
    }
  } finally {
    db.close()
  }
  const artifacts = path.join(dataDir, 'artifacts')
  const files = readdirSync(artifacts, {recursive: true, withFileTypes: true}).filter((entry) => entry.isFile())
  expect(files).toEqual([])
}

async function refusal(projectDir: string): Promise<string> {
  const error = await deployWorker(engine, {projectDir, departmentId: department, wait: false}).then(
    () => null,
    (caught: unknown) => caught,
  )
  expect(error).toBeInstanceOf(KitError)
  expect((error as KitError).code).toBe('usage')
  expect((error as KitError).message.split('\n')).toHaveLength(1)
  nothingWritten()
  return (error as KitError).message
}

describe('the kit refuses at build, writing nothing', () => {
  test('a manifest over 64 KiB', async () => {
    const big = JSON.stringify({...HELLO, staticData: {filler: 'x'.repeat(10 * 1024 * 1024)}})
    expect(await refusal(project(big))).toBe('edgeworker.json is 10 MiB; the limit is 64 KiB')
  })

  test('a duplicate key, named', async () => {
    const text = JSON.stringify(HELLO).replace('"main":"index.js"', '"main":"index.js","main":"evil.js"')
    expect(await refusal(project(text))).toMatch(/^edgeworker\.json is not valid JSON: duplicate key "main" at offset \d+$/)
  })

  test('invalid UTF-8, with its offset', async () => {
    const bytes = Buffer.concat([Buffer.from('{"name":"hel'), Buffer.from([0xc3, 0x28]), Buffer.from(`lo"${JSON.stringify(HELLO).slice(15)}`)])
    expect(await refusal(project(bytes))).toBe('edgeworker.json is not valid JSON: invalid UTF-8 at byte offset 12')
  })

  test('deep nesting: one line from the CLI, no stack overflow', async () => {
    const deep = `{"name":"hello","main":"index.js","modules":["index.js"],"compatibilityDate":"2026-11-01","builderPolicy":"department-worker-project-v2.9","staticData":{"a":${'['.repeat(20_000)}${']'.repeat(20_000)}}}`
    expect(await refusal(project(deep))).toMatch(/^edgeworker\.json is not valid JSON: nesting deeper than 64 levels at offset \d+$/)
    const cli = await runCli(['deploy', project(deep), '--department', department, '--no-wait', '--data-dir', dataDir])
    expect(cli.code).toBe(2)
    expect(cli.stderr.trim()).toMatch(/^error: edgeworker\.json is not valid JSON: nesting deeper than 64 levels at offset \d+$/)
    nothingWritten()
  }, 60_000)

  test('a 100 MB zero-filled file (a few KB compressed) is refused from its size, before anything is read', async () => {
    const dir = project(JSON.stringify(HELLO), (projectDir) => {
      writeFileSync(path.join(projectDir, 'zeros.bin'), '')
      truncateSync(path.join(projectDir, 'zeros.bin'), 100 * 1024 * 1024)
    })
    expect(await refusal(dir)).toBe("the project's files exceed 16 MiB before compression (at zeros.bin); deploy.project_files_max_bytes sets the limit")
  })

  test('names with control characters', async () => {
    for (const name of ['Acme\u001b[31mRED', 'two\nlines', 'bidi\u202eevil']) {
      const error = await store.tenants.createCompany({name}).catch((caught: unknown) => caught)
      expect(error).toBeInstanceOf(KitError)
      expect((error as KitError).message).toMatch(/^company name must not contain control characters \(U\+[0-9A-F]{4} at position \d+\)$/)
      const departmentError = await store.tenants.createDepartment({company_id: 'acme', name}).catch((caught: unknown) => caught)
      expect((departmentError as KitError).message).toMatch(/^department name must not contain control characters/)
    }
    const db = new Database(path.join(dataDir, 'edgeworkers.sqlite'), {readonly: true})
    expect(db.prepare('select name from companies union all select name from departments').pluck().all()).toEqual(['Acme', 'Sales'])
    db.close()
  })
})

describe('the host refuses bad JSON with 400, never 500, writing nothing', () => {
  let host: TestHost
  let client: HostClient
  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1, pairing_max_failures: 5}})
    await host.pair()
    client = host.client()
  }, 60_000)
  afterAll(async () => {
    await host?.stop()
  })

  test('deep nesting, duplicate keys and invalid UTF-8 in a signed upload', async () => {
    const name = scriptNameFor('bad-input/upload')
    const bodies: Array<[string | Buffer, RegExp]> = [
      [`{"mainModule":${'['.repeat(100_000)}${']'.repeat(100_000)}}`, /nesting deeper than 64 levels/],
      ['{"mainModule":"index.js","mainModule":"other.js"}', /duplicate key "mainModule"/],
      [Buffer.concat([Buffer.from('{"mainModule":"'), Buffer.from([0xff]), Buffer.from('"}')]), /invalid UTF-8 at byte offset 15/],
    ]
    for (const [body, message] of bodies) {
      const response = await client.call('PUT', paths.script(name), undefined, {rawBody: body, headers: {'content-type': 'application/json'}})
      expect(response.status).toBe(400)
      expect(response.body).toMatchObject({code: 'invalid_json'})
      expect(response.body.message).toMatch(message)
    }
    expect((await client.call('GET', paths.script(name))).status).toBe(404)
  })

  test('failed pairing attempts are rate-limited per source', async () => {
    const attempt = async () => {
      const response = await request(`${host.adminUrl}${paths.pair}`, {
        method: 'POST',
        headers: {'content-type': 'application/json'},
        body: JSON.stringify({code: 'WRONG-CODE'}),
      })
      return {status: response.statusCode, retryAfter: response.headers['retry-after'], body: (await response.body.json()) as {code: string}}
    }
    const answers = []
    for (let i = 0; i < 7; i++) answers.push(await attempt())
    expect(answers.slice(0, 5).map((answer) => answer.body.code)).toEqual(Array(5).fill('pairing_code_invalid'))
    for (const refused of answers.slice(5)) {
      expect(refused.status).toBe(429)
      expect(refused.body.code).toBe('pairing_rate_limited')
      expect(Number(refused.retryAfter)).toBeGreaterThan(0)
    }
  })
})
