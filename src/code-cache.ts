// Loads a CommonJS file compiled with a V8 code cache, the way v8-compile-cache does: Node 20
// compiles every ES module from source at every start and has no cache for them (Node 22's
// module.enableCompileCache), but vm.Script takes the code V8 produced for the same source before.
// The cache is written once per build when the process exits (so it holds the functions this run
// compiled, not only the top level), to <package>/node_modules/.cache/edgeworkers, else to the
// user's cache directory; a cache that cannot be read or written only costs the compile it saves.
import {accessSync, closeSync, constants, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import os from 'node:os'
import path from 'node:path'
import vm from 'node:vm'

/** Where caches go, first choice first: beside the package's dependencies, then the user's cache. */
function cacheDirs(packageRoot: string): string[] {
  const userCache = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache')
  return [path.join(packageRoot, 'node_modules', '.cache', 'edgeworkers'), path.join(userCache, 'edgeworkers')]
}

function readOrUndefined(file: string): Buffer | undefined {
  try {
    return readFileSync(file)
  } catch {
    return undefined
  }
}

/**
 * The module.exports of the CommonJS `file`. `name` tells this use's cache from others of the same
 * file (a command compiles different functions than another). The cache's name carries the file's
 * path, size and modification time: a new build is a new file, and V8 itself refuses a cache of
 * another V8 version or other flags.
 */
export function requireWithCodeCache(file: string, name: string, packageRoot: string): unknown {
  const fd = openSync(file, 'r')
  let source: string
  let stamp: string
  try {
    const stat = fstatSync(fd, {bigint: true})
    stamp = `${stat.size.toString(36)}-${stat.mtimeNs.toString(36)}`
    source = readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
  // Installations may share the user's cache directory: the file's path keeps their caches apart.
  const prefix = `${name}-${fnv1a(file).toString(36)}-`
  const cacheName = `${prefix}${stamp}-${process.version}-${process.arch}.v8cache`
  const dirs = cacheDirs(packageRoot)
  let cachedData: Buffer | undefined
  for (const dir of dirs) {
    cachedData = readOrUndefined(path.join(dir, cacheName))
    if (cachedData) break
  }
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: file,
    cachedData,
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  })
  if (!cachedData || script.cachedDataRejected) process.once('exit', () => writeCache(script, prefix, cacheName, dirs))
  const module = {exports: {}}
  const wrapper = script.runInThisContext() as (...args: unknown[]) => void
  wrapper.call(module.exports, module.exports, createRequire(file), module, file, path.dirname(file))
  return module.exports
}

/**
 * Atomically (a reader never sees half a cache), in the first directory that takes it, replacing
 * the caches of the file's older builds (those whose name starts with `prefix`). Where none does (a read-only installation and home), nothing
 * is serialized: every start would pay for that again.
 */
function writeCache(script: vm.Script, prefix: string, cacheName: string, dirs: string[]): void {
  const dir = dirs.find(writable)
  if (!dir) return
  try {
    const temporary = path.join(dir, `${cacheName}.${process.pid}.tmp`)
    writeFileSync(temporary, script.createCachedData())
    renameSync(temporary, path.join(dir, cacheName))
    for (const old of readdirSync(dir)) {
      if (old !== cacheName && old.startsWith(prefix) && old.endsWith('.v8cache')) rmSync(path.join(dir, old), {force: true})
    }
  } catch {
    // the disk filled or the directory went away: the next start compiles again
  }
}

function writable(dir: string): boolean {
  try {
    mkdirSync(dir, {recursive: true})
    accessSync(dir, constants.W_OK)
    return true
  } catch {
    return false
  }
}

/** 32-bit FNV-1a: a short, stable name for a path (node:crypto would cost every command its load). */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5
  for (let index = 0; index < text.length; index++) hash = Math.imul(hash ^ text.charCodeAt(index), 0x01000193) >>> 0
  return hash
}
