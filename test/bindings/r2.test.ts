// R2 buckets (wrangler's r2_buckets) against a real edge host running real workerd, under both
// host.code_loading modes: every operation, option and refusal answered as miniflare answers the
// same Worker (the oracle: same request sequence, answers compared as data), a 100 MiB object
// stored and read back whole and in ranges, a bucket reachable only by its own Worker, objects kept
// across a redeploy, a host restart and a host snapshot restored into a fresh host, and bad
// r2_buckets refused in one line.
import {createHash} from 'node:crypto'
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
import {R2_STEPS, R2_WORKER, type R2Step} from './r2-worker-fixture.js'

const COMPATIBILITY_DATE = '2025-06-01'
let oracleAnswers: unknown[]

beforeAll(async () => {
  const oracle = new Miniflare({modules: true, script: R2_WORKER, r2Buckets: {FILES: 'files', ARCHIVE: 'archive-2024'}, compatibilityDate: COMPATIBILITY_DATE})
  try {
    oracleAnswers = []
    for (const step of R2_STEPS) {
      const response = await oracle.dispatchFetch('http://oracle/', {method: 'POST', body: JSON.stringify(step)})
      oracleAnswers.push(await response.json())
    }
  } finally {
    await oracle.dispose()
  }
}, 240_000)

function wranglerToml(name: string, extra: string[] = []): string {
  return [
    `name = "${name}"`,
    'main = "worker.js"',
    `compatibility_date = "${COMPATIBILITY_DATE}"`,
    ...extra,
    '[[r2_buckets]]',
    'binding = "FILES"',
    'bucket_name = "files"',
    'preview_bucket_name = "ignored-on-prem"',
    '[[r2_buckets]]',
    'binding = "ARCHIVE"',
    'bucket_name = "archive-2024"',
  ].join('\n')
}

/** A step's text for an assertion message, without its long values. */
const named = (step: R2Step): string => JSON.stringify(step).slice(0, 200)

describe.each(['restart', 'loader'] as const)('code_loading = %s', (codeLoading) => {
  // The watchdog's defaults: storing or reading 100 MiB holds the shard's one thread for seconds on a
  // loaded two-core machine, past the stall window (500 ms) and the growth a held process may show
  // (256 MB), and is not a runaway: the R2 service lets the shard's I/O in between chunks.
  const kit = kitWithHost(`r2-${codeLoading}`, {settings: {shards: 1, code_loading: codeLoading}})
  const {cli, project, deploy} = kit

  async function run(url: string, step: R2Step): Promise<unknown> {
    const response = await request(url, {method: 'POST', body: JSON.stringify(step), headersTimeout: 300_000, bodyTimeout: 300_000})
    expect(response.statusCode, named(step)).toBe(200)
    return response.body.json()
  }

  test('every operation answers as miniflare answers the same Worker', {timeout: 300_000}, async () => {
    const dir = project('ops', {'wrangler.toml': wranglerToml('ops'), 'worker.js': R2_WORKER})
    const plan = await cli('deploy', dir, '--dry-run', '--json')
    expect(JSON.parse(plan.stdout).bindings.r2Buckets).toEqual([
      {binding: 'FILES', bucketName: 'files'},
      {binding: 'ARCHIVE', bucketName: 'archive-2024'},
    ])
    const {url} = await deploy(dir)
    const answers: unknown[] = []
    for (const step of R2_STEPS) answers.push(await run(url, step))
    // Step by step, so a difference names its step.
    expect(R2_STEPS.map((step, index) => ({step: named(step), answer: answers[index]}))).toEqual(
      R2_STEPS.map((step, index) => ({step: named(step), answer: oracleAnswers[index]})),
    )
  })

  test('a 100 MiB object is stored and read back whole and in ranges', {timeout: 600_000}, async () => {
    const {url} = await deploy(project('large', {'wrangler.toml': wranglerToml('large'), 'worker.js': R2_WORKER}))
    const bytes = 100 * 1024 * 1024 + 3
    const whole = Buffer.alloc(bytes, 0xab)
    const digest = (buffer: Buffer) => ({bytes: buffer.byteLength, sha256: createHash('sha256').update(buffer).digest('hex')})
    const put = (await run(url, {op: 'put', key: 'large', value: {stream: {repeat: {bytes, byte: 0xab}}}})) as {result: {size: number}}
    expect(put.result.size).toBe(bytes)
    expect(await run(url, {op: 'get', key: 'large', read: 'stream'})).toMatchObject({result: {size: bytes, stream: digest(whole)}})
    const offset = 64 * 1024 * 1024 - 1
    expect(await run(url, {op: 'get', key: 'large', read: 'arrayBuffer', options: {range: {offset, length: 2 * 1024 * 1024 + 2}}})).toMatchObject({
      result: {range: {offset, length: 2 * 1024 * 1024 + 2}, arrayBuffer: digest(whole.subarray(offset, offset + 2 * 1024 * 1024 + 2))},
    })
    expect(await run(url, {op: 'get', key: 'large', read: 'arrayBuffer', options: {range: {suffix: 5}}})).toMatchObject({
      result: {range: {offset: bytes - 5, length: 5}, arrayBuffer: digest(whole.subarray(bytes - 5))},
    })
    await run(url, {op: 'put', key: 'large', value: 'small now'})
    expect(await run(url, {op: 'get', key: 'large', read: 'text'})).toMatchObject({result: {text: 'small now'}})
  })

  test("a bucket is its Worker's own; objects outlive a redeploy, a host restart and retirement", {timeout: 240_000}, async () => {
    const owner = await deploy(project('owner', {'wrangler.toml': wranglerToml('owner'), 'worker.js': R2_WORKER}))
    await run(owner.url, {op: 'put', key: 'kept', value: 'across everything', options: {customMetadata: {v: '1'}}})
    await run(owner.url, {binding: 'ARCHIVE', op: 'put', key: 'kept', value: 'the other bucket'})

    // Another department's Worker naming the same bucket has a bucket of its own.
    const stranger = await deploy(project('stranger', {'wrangler.toml': wranglerToml('stranger'), 'worker.js': R2_WORKER}))
    expect(await run(stranger.url, {op: 'get', key: 'kept'})).toEqual({result: null})
    expect(await run(stranger.url, {op: 'listAll'})).toEqual({result: {entries: [], pages: 1}})

    // A new version of the Worker reads the same objects.
    const changed = project('owner-v2', {'wrangler.toml': wranglerToml('owner', ['[vars]', 'VERSION = "2"']), 'worker.js': R2_WORKER})
    expect((await deploy(changed, owner.department)).url).toBe(owner.url)
    expect(await run(owner.url, {op: 'get', key: 'kept', read: 'text'})).toMatchObject({result: {text: 'across everything'}})

    await kit.host.restart()
    expect(await run(owner.url, {op: 'get', key: 'kept', read: 'text'})).toMatchObject({result: {text: 'across everything', customMetadata: {v: '1'}}})
    expect(await run(owner.url, {binding: 'ARCHIVE', op: 'get', key: 'kept', read: 'text'})).toMatchObject({result: {text: 'the other bucket'}})

    // Replaced, read while replaced, and deleted: none of these objects' bytes stay behind
    // (after the restart, so it is not the start-up sweep that removes them).
    await run(owner.url, {op: 'put', key: 'gone', value: {stream: {repeat: {bytes: 3 * 1024 * 1024, byte: 1}}}})
    await run(owner.url, {op: 'put', key: 'gone', value: {stream: {repeat: {bytes: 2 * 1024 * 1024, byte: 2}}}})
    await run(owner.url, {op: 'getWhileReplaced', key: 'gone', value: 'small'})
    // Retired: the Worker no longer answers, and its R2 files stay on the host's disk.
    const retired = await cli('retire', owner.department, '--yes', '--json')
    expect(retired.code, retired.stderr).toBe(0)
    expect((await request(owner.url, {method: 'POST', body: '{}'})).statusCode).toBe(404)
    expect(objectsOnDisk(kit.host.dataDir, owner.script)).toEqual({
      objects: [
        {bucket: 'archive-2024', key: 'kept', bytes: 'the other bucket'},
        {bucket: 'files', key: 'kept', bytes: 'across everything'},
      ],
      unnamedChunks: 0,
    })
  })

  test('a host snapshot restored into a fresh host brings the objects back', {timeout: 240_000}, async () => {
    const {url, script} = await deploy(project('snapshot', {'wrangler.toml': wranglerToml('snapshot'), 'worker.js': R2_WORKER}))
    await run(url, {op: 'put', key: 'backed-up', value: 'in the snapshot', options: {httpMetadata: {contentType: 'text/plain'}}})
    const backupDir = path.join(kit.root, 'backup')
    const backup = await cli('backup', 'create', backupDir, '--json')
    expect({code: backup.code, stderr: backup.stderr}).toEqual({code: 0, stderr: expect.any(String)})
    const hostSnapshot = findFile(backupDir, (file) => file.endsWith('.tar'))
    const manifest = await readSnapshotManifest(hostSnapshot)
    expect(manifest.files.some((file) => file.path.startsWith(`do/${script}/${script}:r2-buckets/`))).toBe(true)
    const restoredDir = path.join(kit.root, 'restored-host')
    mkdirSync(restoredDir, {mode: 0o700})
    await extractSnapshot(hostSnapshot, restoredDir, manifest)
    const restored = await startTestHost({dataDir: restoredDir, settings: {shards: 1, code_loading: codeLoading}})
    try {
      const answer = await run(`${restored.publicUrl}/${script}/`, {op: 'get', key: 'backed-up', read: 'text'})
      expect(answer).toMatchObject({result: {text: 'in the snapshot', httpMetadata: {contentType: 'text/plain'}}})
    } finally {
      await restored.stop()
    }
  })

  // Refused at build, before the host is asked: one code-loading mode is enough.
  if (codeLoading === 'restart')
    test('bad r2_buckets are refused in one line, exit 2, nothing deployed', {timeout: 240_000}, async () => {
      const department = await kit.newDepartment()
      const toml = (...lines: string[]) => ['name = "x"', 'main = "worker.js"', 'compatibility_date = "2025-06-01"', ...lines].join('\n')
      const manifest = (extra: Record<string, unknown>) =>
        JSON.stringify({
          name: 'x',
          main: 'worker.js',
          modules: ['worker.js'],
          compatibilityDate: '2025-06-01',
          builderPolicy: 'department-worker-project-v2.9',
          ...extra,
        })
      const rule = 'must be 3–63 lowercase letters, digits or "-", starting and ending with a letter or digit'
      const refusals: Array<[string, Record<string, string>, string]> = [
        [
          'bad-binding',
          {'wrangler.toml': toml('[[r2_buckets]]', 'binding = "not an identifier"', 'bucket_name = "files"')},
          'wrangler.toml: key "r2_buckets[0].binding" must be an identifier',
        ],
        ['upper', {'wrangler.toml': toml('[[r2_buckets]]', 'binding = "FILES"', 'bucket_name = "Files"')}, `key "r2_buckets[0].bucket_name" ${rule}`],
        ['short', {'wrangler.toml': toml('[[r2_buckets]]', 'binding = "FILES"', 'bucket_name = "ab"')}, `key "r2_buckets[0].bucket_name" ${rule}`],
        ['dash-end', {'wrangler.toml': toml('[[r2_buckets]]', 'binding = "FILES"', 'bucket_name = "files-"')}, `key "r2_buckets[0].bucket_name" ${rule}`],
        [
          'long',
          {'wrangler.toml': toml('[[r2_buckets]]', 'binding = "FILES"', `bucket_name = "${'b'.repeat(64)}"`)},
          `key "r2_buckets[0].bucket_name" ${rule}`,
        ],
        [
          'twice',
          {'wrangler.toml': toml('[[r2_buckets]]', 'binding = "FILES"', 'bucket_name = "aaa"', '[[r2_buckets]]', 'binding = "FILES"', 'bucket_name = "bbb"')},
          'wrangler.toml: key "r2_buckets" binds "FILES" more than once',
        ],
        [
          'taken',
          {'edgeworker.json': manifest({vars: {FILES: 'text'}, r2Buckets: [{binding: 'FILES', bucketName: 'files'}]})},
          'key "r2Buckets[0].binding": the binding name "FILES" is already taken by vars.FILES',
        ],
        ['no-name', {'edgeworker.json': manifest({r2Buckets: [{binding: 'FILES'}]})}, 'key "r2Buckets[0].bucketName"'],
      ]
      await expectDeployRefusals(
        cli,
        department,
        refusals.map(([name, files, message]) => ({name, dir: project(name, {...files, 'worker.js': R2_WORKER}), message})),
      )
      const workers = await cli('worker', 'list', '--json')
      expect((JSON.parse(workers.stdout) as Array<{department_id: string}>).map((worker) => worker.department_id)).not.toContain(department)
    })
})

/** Every object in the Worker's R2 files, with its bucket and bytes (short objects), sorted; and how many chunks no object names. */
function objectsOnDisk(hostDataDir: string, script: string): {objects: Array<{bucket: string; key: string; bytes: string}>; unnamedChunks: number} {
  const dir = path.join(hostDataDir, 'do', script, `${script}:r2-buckets`)
  const objects: Array<{bucket: string; key: string; bytes: string}> = []
  let unnamedChunks = 0
  for (const name of readdirSync(dir).filter((file) => file.endsWith('.sqlite') && file !== 'metadata.sqlite')) {
    const db = new Database(path.join(dir, name), {readonly: true})
    try {
      const bucket = (db.prepare('SELECT name FROM bucket').get() as {name: string}).name
      const rows = db
        .prepare(
          "SELECT key, (SELECT group_concat(data, '') FROM (SELECT data FROM chunks WHERE chunks.blob = objects.blob ORDER BY start)) AS bytes FROM objects",
        )
        .all() as Array<{key: string; bytes: Buffer | string}>
      for (const row of rows) objects.push({bucket, key: row.key, bytes: row.bytes.toString()})
      unnamedChunks += (db.prepare('SELECT count(*) AS n FROM chunks WHERE blob NOT IN (SELECT blob FROM objects)').get() as {n: number}).n
    } finally {
      db.close()
    }
  }
  return {objects: objects.sort((a, b) => a.bucket.localeCompare(b.bucket) || a.key.localeCompare(b.key)), unnamedChunks}
}

function findFile(dir: string, matches: (file: string) => boolean): string {
  for (const entry of readdirSync(dir, {withFileTypes: true, recursive: true})) {
    const file = path.join(entry.parentPath, entry.name)
    if (entry.isFile() && matches(file)) return file
  }
  throw new Error(`no such file under ${dir}`)
}
