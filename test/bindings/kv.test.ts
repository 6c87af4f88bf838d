// KV namespaces (wrangler's kv_namespaces) against a real edge host running real workerd, under both
// host.code_loading modes: every operation, option and limit answered as miniflare answers the same
// Worker (the oracle: same request sequence, answers compared as data), a namespace reachable only
// by its own Worker, data kept across a redeploy, a host restart and a host snapshot restored into a
// fresh host, expired keys never answered, and bad kv_namespaces refused in one line.
import {mkdirSync, readdirSync} from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import {Miniflare} from 'miniflare'
import {request} from 'undici'
import {beforeAll, describe, expect, test} from 'vitest'
import {extractSnapshot, readSnapshotManifest} from '../../src/engine/backup/host-snapshot.js'
import {expectDeployRefusals} from '../support/cli.js'
import {startTestHost} from '../support/host.js'
import {kitWithHost} from '../support/cli-kit.js'
import {KV_STEPS, KV_WORKER, type KvStep} from './kv-worker-fixture.js'

const COMPATIBILITY_DATE = '2025-06-01'
const NAMESPACE_ID = '0f2ac74b498b48028cb68387c421e279'
let oracleAnswers: unknown[]

beforeAll(async () => {
  const oracle = new Miniflare({modules: true, script: KV_WORKER, kvNamespaces: {CACHE: NAMESPACE_ID, OTHER: 'OTHER'}, compatibilityDate: COMPATIBILITY_DATE})
  try {
    oracleAnswers = []
    for (const step of KV_STEPS) {
      const response = await oracle.dispatchFetch('http://oracle/', {method: 'POST', body: JSON.stringify(step)})
      oracleAnswers.push(comparable(await response.json()))
    }
  } finally {
    await oracle.dispose()
  }
}, 120_000)

/** Answers as data to compare: an expirationTtl's expiration and list cursors are the store's own. */
function comparable(answer: unknown): unknown {
  const hourFromNow = Date.now() / 1000 + 3600
  return JSON.parse(JSON.stringify(answer), (key, value) => {
    if (key === 'expiration' && typeof value === 'number' && Math.abs(value - hourFromNow) < 300) return 'an hour from the put'
    if (key === 'cursor' && typeof value === 'string' && value !== '') return 'a cursor'
    return value
  })
}

function wranglerToml(name: string, extra: string[] = []): string {
  return [
    `name = "${name}"`,
    'main = "worker.js"',
    `compatibility_date = "${COMPATIBILITY_DATE}"`,
    ...extra,
    '[[kv_namespaces]]',
    'binding = "CACHE"',
    `id = "${NAMESPACE_ID}"`,
    'preview_id = "ignored-on-prem"',
    '[[kv_namespaces]]',
    'binding = "OTHER"',
  ].join('\n')
}

describe.each(['restart', 'loader'] as const)('code_loading = %s', (codeLoading) => {
  // KV work runs on the shard's one thread: storing Cloudflare's largest value (25 MiB) takes a few
  // hundred ms of it, past the stall watchdog's default 500 ms on a loaded two-core machine.
  const kit = kitWithHost(`kv-${codeLoading}`, {settings: {shards: 1, code_loading: codeLoading, request_cpu_limit_ms: 5_000}})
  const {cli, project, deploy} = kit

  async function run(url: string, step: KvStep): Promise<unknown> {
    const response = await request(url, {method: 'POST', body: JSON.stringify(step)})
    expect(response.statusCode, JSON.stringify(step).slice(0, 200)).toBe(200)
    return response.body.json()
  }
  const get = async (url: string, key: string, binding = 'CACHE') => run(url, {binding, op: 'get', key})

  test('every operation answers as miniflare answers the same Worker', {timeout: 240_000}, async () => {
    const dir = project('ops', {'wrangler.toml': wranglerToml('ops'), 'worker.js': KV_WORKER})
    const plan = await cli('deploy', dir, '--dry-run', '--json')
    expect(JSON.parse(plan.stdout).bindings.kvNamespaces).toEqual([
      {binding: 'CACHE', id: NAMESPACE_ID},
      {binding: 'OTHER', id: 'OTHER'},
    ])
    const {url} = await deploy(dir)
    const answers: unknown[] = []
    for (const step of KV_STEPS) answers.push(comparable(await run(url, step)))
    // Step by step, so a difference names its step.
    expect(KV_STEPS.map((step, index) => ({step, answer: answers[index]}))).toEqual(KV_STEPS.map((step, index) => ({step, answer: oracleAnswers[index]})))
  })

  test("a namespace is its Worker's own; data outlives a redeploy and a host restart; expired keys are never answered", {timeout: 240_000}, async () => {
    const owner = await deploy(project('owner', {'wrangler.toml': wranglerToml('owner'), 'worker.js': KV_WORKER}))
    await run(owner.url, {op: 'put', key: 'kept', value: 'across everything', options: {metadata: {v: 1}}})
    await run(owner.url, {op: 'put', key: 'aging', value: 'soon gone', options: {expirationTtl: 3600}})
    await run(owner.url, {binding: 'OTHER', op: 'put', key: 'kept', value: 'the other namespace'})

    // Another department's Worker naming the same namespace id has a namespace of its own.
    const stranger = await deploy(project('stranger', {'wrangler.toml': wranglerToml('stranger'), 'worker.js': KV_WORKER}))
    expect(await get(stranger.url, 'kept')).toEqual({result: null})
    expect(await run(stranger.url, {op: 'list'})).toEqual({result: {keys: [], list_complete: true, cacheStatus: null}})

    // A new version of the Worker reads the same data.
    const changed = project('owner-v2', {'wrangler.toml': wranglerToml('owner', ['[vars]', 'VERSION = "2"']), 'worker.js': KV_WORKER})
    expect((await deploy(changed, owner.department)).url).toBe(owner.url)
    expect(await get(owner.url, 'kept')).toEqual({result: 'across everything'})

    // Restarted, with `aging` past its expiration on disk (as if the clock had moved on an hour).
    await kit.host.restart({}, () => expireOnDisk(kit.host.dataDir, owner.script, 'aging'))
    expect(await run(owner.url, {op: 'getWithMetadata', key: 'kept'})).toEqual({result: {value: 'across everything', metadata: {v: 1}, cacheStatus: null}})
    expect(await get(owner.url, 'kept', 'OTHER')).toEqual({result: 'the other namespace'})
    expect(await get(owner.url, 'aging')).toEqual({result: null})
    expect(await run(owner.url, {op: 'get', keys: ['aging', 'kept']})).toEqual({result: {map: {aging: null, kept: 'across everything'}}})
    expect(await run(owner.url, {op: 'list'})).toEqual({result: {keys: [{name: 'kept', metadata: {v: 1}}], list_complete: true, cacheStatus: null}})

    // Retired: the Worker no longer answers, and its KV files stay on the host's disk.
    const retired = await cli('retire', owner.department, '--yes', '--json')
    expect(retired.code, retired.stderr).toBe(0)
    expect((await request(owner.url, {method: 'POST', body: '{}'})).statusCode).toBe(404)
    expect(valuesOnDisk(kit.host.dataDir, owner.script)).toEqual(['across everything', 'the other namespace'])
  })

  test('a host snapshot restored into a fresh host brings the KV data back', {timeout: 240_000}, async () => {
    const {url, script} = await deploy(project('snapshot', {'wrangler.toml': wranglerToml('snapshot'), 'worker.js': KV_WORKER}))
    await run(url, {op: 'put', key: 'backed-up', value: 'in the snapshot', options: {metadata: 'm'}})
    // `backup create` takes the host's data snapshot under its fence; the snapshot is what a restore puts back.
    const backupDir = path.join(kit.root, 'backup')
    const backup = await cli('backup', 'create', backupDir, '--json')
    expect({code: backup.code, stderr: backup.stderr}).toEqual({code: 0, stderr: expect.any(String)})
    const hostSnapshot = findFile(backupDir, (file) => file.endsWith('.tar'))
    const manifest = await readSnapshotManifest(hostSnapshot)
    expect(manifest.files.some((file) => file.path.startsWith(`do/${script}/${script}:kv-namespaces/`))).toBe(true)
    const restoredDir = path.join(kit.root, 'restored-host')
    mkdirSync(restoredDir, {mode: 0o700})
    await extractSnapshot(hostSnapshot, restoredDir, manifest)
    const restored = await startTestHost({dataDir: restoredDir, settings: {shards: 1, code_loading: codeLoading}})
    try {
      const answer = await run(`${restored.publicUrl}/${script}/`, {op: 'getWithMetadata', key: 'backed-up'})
      expect(answer).toEqual({result: {value: 'in the snapshot', metadata: 'm', cacheStatus: null}})
    } finally {
      await restored.stop()
    }
  })

  // Refused at build, before the host is asked: one code-loading mode is enough.
  if (codeLoading === 'restart')
    test('bad kv_namespaces are refused in one line, exit 2, nothing deployed', async () => {
      const department = await kit.newDepartment()
      const refusals: Array<[string, Record<string, string>, string]> = [
        [
          'bad-binding',
          {'wrangler.toml': 'name = "x"\nmain = "worker.js"\ncompatibility_date = "2025-06-01"\n[[kv_namespaces]]\nbinding = "not an identifier"\nid = "a"'},
          'error: wrangler.toml: key "kv_namespaces[0].binding" must be an identifier',
        ],
        [
          'bad-id',
          {'wrangler.toml': 'name = "x"\nmain = "worker.js"\ncompatibility_date = "2025-06-01"\n[[kv_namespaces]]\nbinding = "KV"\nid = "has space"'},
          'error: wrangler.toml: key "kv_namespaces[0].id" must be 1–128 printable ASCII characters without spaces',
        ],
        [
          'twice',
          {
            'wrangler.toml':
              'name = "x"\nmain = "worker.js"\ncompatibility_date = "2025-06-01"\n[[kv_namespaces]]\nbinding = "KV"\nid = "a"\n[[kv_namespaces]]\nbinding = "KV"\nid = "b"',
          },
          'error: wrangler.toml: key "kv_namespaces" binds "KV" more than once',
        ],
        [
          'taken',
          {
            'edgeworker.json': JSON.stringify({
              name: 'x',
              main: 'worker.js',
              modules: ['worker.js'],
              compatibilityDate: '2025-06-01',
              builderPolicy: 'department-worker-project-v2.9',
              vars: {KV: 'text'},
              kvNamespaces: [{binding: 'KV', id: 'a'}],
            }),
          },
          'key "kvNamespaces[0].binding": the binding name "KV" is already taken by vars.KV',
        ],
        [
          'no-id',
          {
            'edgeworker.json': JSON.stringify({
              name: 'x',
              main: 'worker.js',
              modules: ['worker.js'],
              compatibilityDate: '2025-06-01',
              builderPolicy: 'department-worker-project-v2.9',
              kvNamespaces: [{binding: 'KV'}],
            }),
          },
          'key "kvNamespaces[0].id"',
        ],
      ]
      await expectDeployRefusals(
        cli,
        department,
        refusals.map(([name, files, message]) => ({name, dir: project(name, {...files, 'worker.js': KV_WORKER}), message})),
      )
      const workers = await cli('worker', 'list', '--json')
      expect((JSON.parse(workers.stdout) as Array<{department_id: string}>).map((worker) => worker.department_id)).not.toContain(department)
    })
})

/** Sets `key`'s expiration to long ago in the Worker's KV files (the host is stopped). */
function expireOnDisk(hostDataDir: string, script: string, key: string): void {
  let changed = 0
  for (const db of kvDatabases(hostDataDir, script)) {
    try {
      changed += db.prepare('UPDATE entries SET expiration = 1000 WHERE key = ?').run(key).changes
    } finally {
      db.close()
    }
  }
  expect(changed).toBe(1)
}

/** Every value in the Worker's KV files (short values: one chunk each), sorted. */
function valuesOnDisk(hostDataDir: string, script: string): string[] {
  const values: string[] = []
  for (const db of kvDatabases(hostDataDir, script)) {
    try {
      for (const row of db.prepare('SELECT value FROM entries').all() as Array<{value: Buffer}>) values.push(row.value.toString())
    } finally {
      db.close()
    }
  }
  return values.sort()
}

function kvDatabases(hostDataDir: string, script: string): Database.Database[] {
  const dir = path.join(hostDataDir, 'do', script, `${script}:kv-namespaces`)
  return readdirSync(dir)
    .filter((name) => name.endsWith('.sqlite') && name !== 'metadata.sqlite')
    .map((name) => new Database(path.join(dir, name)))
}

function findFile(dir: string, matches: (file: string) => boolean): string {
  for (const entry of readdirSync(dir, {withFileTypes: true, recursive: true})) {
    const file = path.join(entry.parentPath, entry.name)
    if (entry.isFile() && matches(file)) return file
  }
  throw new Error(`no such file under ${dir}`)
}
