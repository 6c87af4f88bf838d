// The V8 code cache the hot commands start from (src/code-cache.ts): each load runs in a fresh
// process, as a CLI start does, since the cache is written when the process exits.
import {execFileSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {afterEach, beforeEach, expect, test} from 'vitest'

const CODE_CACHE = fileURLToPath(new URL('../../src/code-cache.ts', import.meta.url))

let root: string
let userCache: string
beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-code-cache-'))
  userCache = path.join(root, 'user-cache')
  writeFileSync(path.join(root, 'dep.cjs'), 'module.exports = 40\n')
  writeBundle(2)
})
afterEach(() => rmSync(root, {recursive: true, force: true}))

function writeBundle(addend: number): void {
  writeFileSync(path.join(root, 'bundle.cjs'), `module.exports = {answer: require('./dep.cjs') + ${addend}, file: __filename}\n`)
}

/** Loads `bundle` (bundle.cjs) as a CLI start does, in a fresh process; its module.exports. */
function load(bundle = path.join(root, 'bundle.cjs')): {answer: number; file: string} {
  const script = `import(${JSON.stringify(CODE_CACHE)}).then((m) => process.stdout.write(JSON.stringify(m.requireWithCodeCache(${JSON.stringify(bundle)}, 'probe', ${JSON.stringify(root)}))))`
  const stdout = execFileSync(process.execPath, ['--import', 'tsx', '-e', script], {env: {...process.env, XDG_CACHE_HOME: userCache}, encoding: 'utf8'})
  return JSON.parse(stdout) as {answer: number; file: string}
}

const caches = (dir: string) => readdirSync(dir).filter((name) => name.endsWith('.v8cache'))

test('the first start writes the cache beside the dependencies; the next ones use it and leave it as it is', () => {
  expect(load()).toEqual({answer: 42, file: path.join(root, 'bundle.cjs')})
  const dir = path.join(root, 'node_modules', '.cache', 'edgeworkers')
  const [cache] = caches(dir)
  expect(cache).toMatch(/^probe-.+\.v8cache$/)
  const written = statSync(path.join(dir, cache!), {bigint: true})

  expect(load().answer).toBe(42)
  const after = statSync(path.join(dir, cache!), {bigint: true})
  expect([after.ino, after.mtimeNs]).toEqual([written.ino, written.mtimeNs])
})

test("a new build of the file gets a new cache and the old build's is removed", () => {
  load()
  const dir = path.join(root, 'node_modules', '.cache', 'edgeworkers')
  const [old] = caches(dir)
  writeBundle(3)
  expect(load().answer).toBe(43)
  const now = caches(dir)
  expect(now).toHaveLength(1)
  expect(now[0]).not.toBe(old)
})

test("where the package's directory takes no cache, the user's cache directory does", () => {
  writeFileSync(path.join(root, 'node_modules'), 'not a directory')
  expect(load().answer).toBe(42)
  expect(caches(path.join(userCache, 'edgeworkers'))).toHaveLength(1)
  expect(load().answer).toBe(42)
})

test('where no directory takes a cache, every start compiles and writes nothing', () => {
  writeFileSync(path.join(root, 'node_modules'), 'not a directory')
  writeFileSync(userCache, 'not a directory either')
  expect(load().answer).toBe(42)
  expect(load().answer).toBe(42)
  expect(readdirSync(root).filter((name) => name.includes('.tmp') || name.endsWith('.v8cache'))).toEqual([])
})

test('two installations sharing a cache directory keep a cache each', () => {
  mkdirSync(path.join(root, 'other'))
  writeFileSync(path.join(root, 'other', 'dep.cjs'), 'module.exports = 40\n')
  writeFileSync(path.join(root, 'other', 'bundle.cjs'), readFileSync(path.join(root, 'bundle.cjs')))
  load()
  load(path.join(root, 'other', 'bundle.cjs'))
  expect(caches(path.join(root, 'node_modules', '.cache', 'edgeworkers'))).toHaveLength(2)
})
