import {randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterEach, describe, expect, test} from 'vitest'
import {sha256Hex} from '../../src/canonical-json.js'
import {ArtifactError, artifactKeyFor, FileArtifactStore, parseArtifactKey, type ArtifactProblem} from '../../src/artifacts/store.js'
import {KitError} from '../../src/errors.js'

const MiB = 1024 * 1024
const dataDirs: string[] = []

afterEach(() => {
  for (const dir of dataDirs.splice(0)) rmSync(dir, {recursive: true, force: true})
})

function newDataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-artifacts-'))
  dataDirs.push(dir)
  return dir
}

async function openStore(): Promise<FileArtifactStore> {
  return FileArtifactStore.open(newDataDir())
}

function fileOf(store: FileArtifactStore, key: string): string {
  return path.join(store.root, ...key.split('/'))
}

function incoming(store: FileArtifactStore): string[] {
  return readdirSync(path.join(store.root, '.incoming'))
}

async function rejection(promise: Promise<unknown>): Promise<ArtifactError> {
  const error: unknown = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  )
  expect(error).toBeInstanceOf(ArtifactError)
  return error as ArtifactError
}

async function expectProblem(promise: Promise<unknown>, problem: ArtifactProblem, message: string): Promise<void> {
  const error = await rejection(promise)
  expect(error.reason).toBe(problem)
  expect(error.message).toBe(message)
}

describe('artifact keys', () => {
  test('name the kind and the SHA-256, sharded by its first two hex', () => {
    const sha256 = sha256Hex('bytes')
    const key = artifactKeyFor('bundle', sha256)
    expect(key).toBe(`bundle/sha256/${sha256.slice(0, 2)}/${sha256}`)
    expect(parseArtifactKey(key)).toEqual({kind: 'bundle', sha256})
  })

  test.each([
    ['an unknown kind', `script/sha256/ab/ab${'0'.repeat(62)}`],
    ['a shard that does not match the digest', `project/sha256/cd/ab${'0'.repeat(62)}`],
    ['a short digest', 'project/sha256/ab/abc'],
    ['uppercase hex', `project/sha256/AB/AB${'0'.repeat(62)}`],
    ['a path escape', `project/sha256/ab/../../ab${'0'.repeat(62)}`],
  ])('refuse %s', (_name, key) => {
    expect(parseArtifactKey(key)).toBeNull()
  })
})

describe('FileArtifactStore', () => {
  test('lives under <data_dir>/artifacts and round-trips bytes under their content key', async () => {
    const dataDir = newDataDir()
    const store = await FileArtifactStore.open(dataDir)
    expect(store.root).toBe(path.join(dataDir, 'artifacts'))

    const bytes = randomBytes(4096)
    const key = await store.put('project', bytes)
    expect(key).toBe(artifactKeyFor('project', sha256Hex(bytes)))
    expect(readFileSync(fileOf(store, key)).equals(bytes)).toBe(true)
    expect((await store.get(key, 4096)).equals(bytes)).toBe(true)
    expect(await store.has(key)).toBe(true)
    expect(incoming(store)).toEqual([])
  })

  test('putting the same bytes again returns the same key without rewriting them, and renews their time', async () => {
    const store = await openStore()
    const bytes = Buffer.from('same bytes')
    const key = await store.put('bundle', bytes)
    const inode = statSync(fileOf(store, key)).ino
    const hourAgo = new Date(Date.now() - 3_600_000)
    utimesSync(fileOf(store, key), hourAgo, hourAgo)
    expect(await store.put('bundle', Buffer.from('same bytes'))).toBe(key)
    expect(statSync(fileOf(store, key)).ino).toBe(inode) // not rewritten
    expect(statSync(fileOf(store, key)).mtimeMs).toBeGreaterThan(hourAgo.getTime() + 1_800_000)
  })

  test('list yields the artifacts of one kind, sorted, with their times; a file that is no artifact is never listed', async () => {
    const store = await openStore()
    const keys = [await store.put('asset', Buffer.from('one')), await store.put('asset', Buffer.from('two'))].sort()
    await store.put('bundle', Buffer.from('not an asset'))
    writeFileSync(`${fileOf(store, keys[0]!)}~`, 'an editor backup')
    const listed = []
    for await (const artifact of store.list('asset')) listed.push(artifact)
    expect(listed).toEqual(keys.map((key) => ({key, modifiedAt: statSync(fileOf(store, key)).mtimeMs})))
  })

  test('deleteIfNotPutSince keeps an artifact put after the cutoff and deletes one put before it', async () => {
    const store = await openStore()
    const key = await store.put('asset', Buffer.from('timed'))
    const putAt = statSync(fileOf(store, key)).mtimeMs
    expect(await store.deleteIfNotPutSince(key, putAt - 1)).toBe(false)
    expect(await store.has(key)).toBe(true)
    expect(await store.deleteIfNotPutSince(key, putAt)).toBe(true)
    expect(await store.has(key)).toBe(false)
    expect(await store.deleteIfNotPutSince(key, putAt)).toBe(true)
  })

  test('concurrent puts of the same bytes all succeed and leave one intact copy', async () => {
    const store = await openStore()
    const bytes = randomBytes(MiB)
    const keys = await Promise.all(Array.from({length: 8}, () => store.put('bundle', bytes)))
    expect(new Set(keys).size).toBe(1)
    expect((await store.get(keys[0]!, MiB)).equals(bytes)).toBe(true)
    expect(incoming(store)).toEqual([])
  })

  test('a damaged copy is replaced by the next put', async () => {
    const store = await openStore()
    const bytes = Buffer.from('original')
    const key = await store.put('project', bytes)
    writeFileSync(fileOf(store, key), 'damaged!')
    expect(await store.put('project', bytes)).toBe(key)
    expect((await store.get(key, 100)).equals(bytes)).toBe(true)
  })

  test('a write that fails leaves nothing behind: no artifact, no temp file', async () => {
    const store = await openStore()
    const bytes = Buffer.from('cannot land')
    const key = artifactKeyFor('bundle', sha256Hex(bytes))
    // A directory squatting on the artifact's path makes the final rename fail.
    mkdirSync(path.join(fileOf(store, key), 'squatter'), {recursive: true})
    await expect(store.put('bundle', bytes)).rejects.toThrow()
    expect(incoming(store)).toEqual([])
    expect(statSync(fileOf(store, key)).isDirectory()).toBe(true)
    expect(await store.has(key)).toBe(false)
  })

  test('get refuses a missing artifact', async () => {
    const store = await openStore()
    const key = artifactKeyFor('bundle', sha256Hex('never stored'))
    const error = await rejection(store.get(key, MiB))
    expect(error).toBeInstanceOf(KitError)
    expect(error.code).toBe('not_found')
    expect(error.reason).toBe('artifact_missing')
    expect(error.message).toBe(`bundle artifact ${key} is missing`)
  })

  test('get refuses an oversize artifact without reading it', async () => {
    const store = await openStore()
    const key = artifactKeyFor('project', sha256Hex('pretend'))
    mkdirSync(path.dirname(fileOf(store, key)), {recursive: true})
    writeFileSync(fileOf(store, key), '')
    // 64 GiB, sparse: reading it would exhaust memory long before a hash could be checked.
    truncateSync(fileOf(store, key), 64 * 1024 * MiB)
    await expectProblem(store.get(key, 2 * MiB), 'artifact_too_large', `project artifact ${key} is 65536 MiB; the limit is 2 MiB`)
  })

  test('get refuses an artifact whose bytes do not hash to its key', async () => {
    const store = await openStore()
    const key = await store.put('bundle', Buffer.from('good'))
    writeFileSync(fileOf(store, key), 'evil')
    await expectProblem(store.get(key, MiB), 'artifact_corrupt', `bundle artifact ${key} does not hash to its key`)
  })

  test('get, has and delete refuse malformed keys', async () => {
    const store = await openStore()
    const message = '"../../etc/passwd" is not an artifact key'
    await expectProblem(store.get('../../etc/passwd', MiB), 'artifact_key_invalid', message)
    await expectProblem(store.has('../../etc/passwd'), 'artifact_key_invalid', message)
    await expectProblem(store.delete('../../etc/passwd'), 'artifact_key_invalid', message)
  })

  test('delete is idempotent: deleting a missing artifact succeeds', async () => {
    const store = await openStore()
    const key = await store.put('project', Buffer.from('short-lived'))
    await store.delete(key)
    expect(await store.has(key)).toBe(false)
    await expect(store.delete(key)).resolves.toBeUndefined()
    await expect(store.delete(artifactKeyFor('bundle', sha256Hex('never stored')))).resolves.toBeUndefined()
  })

  test('open fails with one line when the data dir cannot hold artifacts', async () => {
    const dataDir = path.join(newDataDir(), 'not-a-dir')
    writeFileSync(dataDir, 'a file')
    const error: unknown = await FileArtifactStore.open(dataDir).then(
      () => undefined,
      (thrown: unknown) => thrown,
    )
    expect(error).toBeInstanceOf(KitError)
    expect((error as KitError).code).toBe('store_unavailable')
    expect((error as KitError).reason).toBe('artifact_store_unavailable')
    expect((error as KitError).message).toBe(`artifact store ${path.join(dataDir, 'artifacts')} is not usable: cannot create ${dataDir}: EEXIST`)
  })
})
