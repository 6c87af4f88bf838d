// The host's second release of a script (a gradual deployment), on the state file alone: an upload
// with a split keeps the current release (or the one kept already) beside the new one, with its own
// modules; a split naming a release the script does not hold is refused and changes nothing; an
// upload without a split drops the kept release and the module blobs only it used.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterEach, beforeEach, expect, test} from 'vitest'
import {sha256Hex} from '../../src/canonical-json.js'
import {HostError} from '../../src/edge-host/errors.js'
import {HostState, type ScriptUpload} from '../../src/edge-host/state/host-state.js'
import {scriptOfService, splitServiceName} from '../../src/workerd/script.js'
import {scriptNameFor, stateUpload} from '../support/worker-fixtures.js'

let dataDir: string
let state: HostState
const name = scriptNameFor('state/split')
const shards = {count: 2, maxScriptsPerShard: 10}
const V1 = '3f2b9c1e-0000-4000-8000-000000000001'
const V2 = '3f2b9c1e-0000-4000-8000-000000000002'

beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-host-splits-'))
  state = HostState.open(dataDir)
})
afterEach(() => {
  state.close()
  rmSync(dataDir, {recursive: true, force: true})
})

const source = (text: string) => `export default {fetch() {return new Response(${JSON.stringify(text)})}}`
function upload(text: string, versionId: string, split: ScriptUpload['split'] = null): ScriptUpload {
  return stateUpload(text, source(text), {department: 'acme-sales', versionIds: [versionId], split})
}
const blobExists = (text: string) => {
  try {
    state.scripts.moduleContent(sha256Hex(Buffer.from(source(text))))
    return true
  } catch {
    return false
  }
}

test('a split keeps the current release beside the upload; a change of share keeps it; no split drops it and its blobs', () => {
  const one = upload('one', V1)
  state.saveUpload(name, one, shards)
  const split = {releaseGeneration: one.releaseGeneration, versionIds: [V1], percentage: 90}
  expect(state.saveUpload(name, upload('two', V2, split), shards)).not.toBeNull()
  expect(state.scripts.route(name)).toMatchObject({versionIds: [V2], split})
  const runnable = state.scripts.runnableScripts(state.scripts.get(name)!.shard!)
  expect(runnable.map((script) => [script.name, script.releaseGeneration])).toEqual([
    [name, upload('two', V2).releaseGeneration],
    [splitServiceName(name), one.releaseGeneration],
  ])
  expect(runnable[1]!.modules.map((module) => module.sha256)).toEqual([sha256Hex(Buffer.from(source('one')))])

  // 90 → 50: the same upload with another share keeps the release kept already.
  expect(state.saveUpload(name, upload('two', V2, {...split, percentage: 50}), shards)).not.toBeNull()
  expect(state.scripts.route(name)?.split?.percentage).toBe(50)
  expect(blobExists('one')).toBe(true)

  // Promoted: the kept release goes, and the blob only it used.
  state.saveUpload(name, upload('two', V2), shards)
  expect(state.scripts.route(name)?.split).toBeNull()
  expect(state.scripts.runnableScripts(state.scripts.get(name)!.shard!).map((script) => script.name)).toEqual([name])
  expect(blobExists('one')).toBe(false)
})

test('a split naming a release the script does not hold is refused, and nothing changes', () => {
  state.saveUpload(name, upload('one', V1), shards)
  const before = state.scripts.get(name)
  const missing = {releaseGeneration: 'not-held', versionIds: [V1], percentage: 90}
  expect(() => state.saveUpload(name, upload('two', V2, missing), shards)).toThrow(HostError)
  expect(() => state.saveUpload(name, upload('two', V2, missing), shards)).toThrow(/holds no release not-held/)
  expect(state.scripts.get(name)).toEqual(before)
  expect(state.scripts.route(name)?.split).toBeNull()
})

test("a split release's workerd name maps back to its script (tail events, metrics and incidents count against the Worker)", () => {
  expect(scriptOfService(splitServiceName(name))).toEqual({script: name, split: true})
  expect(scriptOfService(name)).toEqual({script: name, split: false})
})

test("a split keeps both releases' static assets until a release leaves; a Durable Object binding refuses it, and nothing changes", () => {
  const assetsOf = (text: string): ScriptUpload['assets'] => ({
    config: {htmlHandling: 'auto-trailing-slash', notFoundHandling: 'none', runWorkerFirst: false},
    files: [{path: '/version.txt', sha256: sha256Hex(text), size: text.length}],
    headers: null,
    redirects: null,
  })
  const [one, two, three] = (['one', 'two', 'three'] as const).map((text, i) => ({...upload(text, [V1, V2, V2][i]!), assets: assetsOf(text)}))
  state.saveUpload(name, one!, shards)
  state.saveUpload(name, {...two!, split: {releaseGeneration: one!.releaseGeneration, versionIds: [V1], percentage: 50}}, shards)
  state.saveUpload(name, {...three!, split: {releaseGeneration: one!.releaseGeneration, versionIds: [V1], percentage: 50}}, shards)
  // The kept release (one), the uploaded one (three) and the one it replaced (two, serving until the swap).
  const held = () => [one, two, three].map((release) => state.releaseAssets.of(name, release!.releaseGeneration)?.files[0]?.path ?? null)
  expect(held()).toEqual(['/version.txt', '/version.txt', '/version.txt'])
  // A change of share: two, neither kept nor replaced just now, goes.
  state.saveUpload(name, {...three!, split: {releaseGeneration: one!.releaseGeneration, versionIds: [V1], percentage: 70}}, shards)
  expect(held()).toEqual(['/version.txt', null, '/version.txt'])

  const before = state.scripts.get(name)
  const durable = {...upload('four', V1), bindings: [{type: 'durable_object_namespace' as const, name: 'ROOMS', className: 'Room'}]}
  const split = {releaseGeneration: three!.releaseGeneration, versionIds: [V2], percentage: 50}
  expect(() => state.saveUpload(name, {...durable, split}, shards)).toThrow('a script with a durable_object_namespace binding serves one release: no split')
  expect(state.scripts.get(name)).toEqual(before)
})
