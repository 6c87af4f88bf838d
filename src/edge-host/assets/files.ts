// The host's asset files, content-addressed under <data dir>/assets/<first 2 hex>/<64 hex>: a file
// several releases or scripts serve is stored once. Written atomically after its SHA-256 is checked;
// read through a bounded in-memory cache of small files (the data plane's hot path), larger ones
// from disk each time.
import {mkdirSync} from 'node:fs'
import {readdir, readFile, stat, unlink, utimes} from 'node:fs/promises'
import path from 'node:path'
import {sha256Hex} from '../../canonical-json.js'
import {writeFileAtomically} from '../../util/atomic-file.js'
import {HostError} from '../errors.js'

export const ASSETS_DIR = 'assets'
/** Where files are written before their atomic rename; never part of a snapshot. */
export const INCOMING_DIR = '.incoming'
/** Files up to this size are kept in memory once read; at most CACHE_BYTES of them. */
const CACHED_FILE_MAX_BYTES = 1024 * 1024
const CACHE_BYTES = 64 * 1024 * 1024

export class AssetFiles {
  readonly root: string
  private readonly cache = new Map<string, Buffer>()
  private cachedBytes = 0

  constructor(dataDir: string) {
    this.root = path.join(dataDir, ASSETS_DIR)
    mkdirSync(path.join(this.root, INCOMING_DIR), {recursive: true, mode: 0o700})
  }

  fileOf(sha256: string): string {
    return path.join(this.root, sha256.slice(0, 2), sha256)
  }

  async has(sha256: string): Promise<boolean> {
    return stat(this.fileOf(sha256)).then(
      (stats) => stats.isFile(),
      () => false,
    )
  }

  /**
   * The hashes the host lacks. The ones it holds are touched: a deploy about to name them keeps
   * them from the collection of unreferenced files for its grace period.
   */
  async missing(hashes: readonly string[]): Promise<string[]> {
    const unique = [...new Set(hashes)]
    const now = new Date()
    const held = await Promise.all(
      unique.map((hash) =>
        utimes(this.fileOf(hash), now, now).then(
          () => true,
          () => false,
        ),
      ),
    )
    return unique.filter((_, index) => !held[index])
  }

  async put(sha256: string, bytes: Buffer, maxBytes: number): Promise<void> {
    if (bytes.length > maxBytes) throw new HostError('request_too_large', `asset ${sha256} is ${bytes.length} bytes; the limit is ${maxBytes} bytes`)
    if (sha256Hex(bytes) !== sha256) throw new HostError('invalid_request', `asset bytes do not hash to ${sha256}`)
    if (await this.has(sha256)) return
    const file = this.fileOf(sha256)
    mkdirSync(path.dirname(file), {recursive: true, mode: 0o700})
    await writeFileAtomically(file, bytes, {temporaryDir: path.join(this.root, INCOMING_DIR)})
  }

  /** The file's bytes, or null when it is missing. */
  async read(sha256: string): Promise<Buffer | null> {
    const cached = this.cache.get(sha256)
    if (cached) return cached
    let bytes: Buffer
    try {
      bytes = await readFile(this.fileOf(sha256))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw error
    }
    if (bytes.length <= CACHED_FILE_MAX_BYTES) {
      if (this.cachedBytes + bytes.length > CACHE_BYTES) this.clearCache()
      this.cache.set(sha256, bytes)
      this.cachedBytes += bytes.length
    }
    return bytes
  }

  /** The stored files' SHA-256s that no release names, sorted (the orphan report's host side). */
  async unreferenced(referenced: ReadonlySet<string>): Promise<string[]> {
    const found: string[] = []
    for await (const {sha256} of this.stored()) if (!referenced.has(sha256)) found.push(sha256)
    return found.sort()
  }

  /**
   * Removes the files no release names that were not written or asked about within `graceMs` (a
   * deploy sends its files before the upload that names them); returns how many went.
   */
  async removeUnreferenced(referenced: ReadonlySet<string>, graceMs: number): Promise<number> {
    let removed = 0
    const cutoff = Date.now() - graceMs
    for await (const {sha256, file} of this.stored()) {
      if (referenced.has(sha256)) continue
      const modified = await stat(file).then(
        (stats) => stats.mtimeMs,
        () => 0,
      )
      if (modified > cutoff) continue
      await unlink(file).catch(() => undefined)
      this.cache.delete(sha256)
      removed++
    }
    return removed
  }

  private async *stored(): AsyncIterable<{sha256: string; file: string}> {
    for (const shard of await readdir(this.root)) {
      if (shard === INCOMING_DIR) continue
      for (const name of await readdir(path.join(this.root, shard))) yield {sha256: name, file: path.join(this.root, shard, name)}
    }
  }

  private clearCache(): void {
    this.cache.clear()
    this.cachedBytes = 0
  }
}
