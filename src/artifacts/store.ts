// Content-addressed artifact store. A key names the artifact's kind and the SHA-256 of its bytes,
// so a key is known before anything is written (cleanup intents are created first), writing the
// same bytes twice is a no-op, and every read can prove it got the bytes the key promises.
//
// Layout under <data_dir>/artifacts/: `<kind>/sha256/<first 2 hex>/<64 hex>`, plus `.incoming/`
// for writes in flight (a crash can leave a temp file there; it is never read as an artifact).
import {constants as fsConstants} from 'node:fs'
import {access, mkdir, open, readdir, stat, unlink, utimes, type FileHandle} from 'node:fs/promises'
import path from 'node:path'
import {sha256Hex} from '../canonical-json.js'
import {KitError} from '../errors.js'
import {syncPath, writeFileAtomically} from '../util/atomic-file.js'
import {createPrivateDir} from '../util/private-files.js'
import {overLimitMessage} from './size.js'

/** `asset`: one static asset file, stored once however many versions and Workers serve it. */
export const ARTIFACT_KINDS = ['project', 'bundle', 'asset'] as const
export type ArtifactKind = (typeof ARTIFACT_KINDS)[number]

/** `<kind>/sha256/<first 2 hex>/<64 hex>` */
export type ArtifactKey = string

const ARTIFACT_KEY_PATTERN = /^(project|bundle|asset)\/sha256\/([0-9a-f]{2})\/([0-9a-f]{64})$/
const SHA256_PATTERN = /^[0-9a-f]{64}$/
const INCOMING_DIR = '.incoming'

export function artifactKeyFor(kind: ArtifactKind, sha256: string): ArtifactKey {
  if (!SHA256_PATTERN.test(sha256)) throw new Error(`not a SHA-256 hex digest: ${JSON.stringify(sha256)}`)
  return `${kind}/sha256/${sha256.slice(0, 2)}/${sha256}`
}

/** The kind and digest a key names, or null when it is not a well-formed artifact key. */
export function parseArtifactKey(key: string): {kind: ArtifactKind; sha256: string} | null {
  const match = ARTIFACT_KEY_PATTERN.exec(key)
  if (!match) return null
  const [, kind, shard, sha256] = match as unknown as [string, ArtifactKind, string, string]
  return sha256.startsWith(shard) ? {kind, sha256} : null
}

export type ArtifactProblem = 'artifact_key_invalid' | 'artifact_missing' | 'artifact_too_large' | 'artifact_corrupt'

/** A read that cannot return the promised bytes. `reason` says why; other I/O errors pass through. */
export class ArtifactError extends KitError {
  declare readonly reason: ArtifactProblem

  constructor(
    problem: ArtifactProblem,
    readonly key: string,
    message: string,
  ) {
    super(problem === 'artifact_missing' ? 'not_found' : 'failed', message, problem)
    this.name = 'ArtifactError'
  }
}

/** What the engine needs from artifact storage; tests substitute failing implementations. */
export interface ArtifactStore {
  /**
   * Stores the bytes (atomically; if an intact copy is there, only its modification time is renewed)
   * and returns their key.
   */
  put(kind: ArtifactKind, bytes: Uint8Array): Promise<ArtifactKey>
  /**
   * The bytes under `key`, verified against the key's SHA-256. Throws ArtifactError when the key is
   * malformed, the artifact is missing, larger than `maxBytes` (refused before reading it), or corrupt.
   */
  get(key: ArtifactKey, maxBytes: number): Promise<Buffer>
  has(key: ArtifactKey): Promise<boolean>
  /** Removes the artifact; removing a missing one succeeds. */
  delete(key: ArtifactKey): Promise<void>
  /** Every stored artifact of the kind, with when it was last put (ms since the epoch). */
  list(kind: ArtifactKind): AsyncIterable<StoredArtifact>
  /**
   * Removes the artifact unless it was put after `cutoff` (ms since the epoch): a submission puts
   * the objects its version will name before it commits. true when it is gone (or was missing).
   */
  deleteIfNotPutSince(key: ArtifactKey, cutoff: number): Promise<boolean>
}

export interface StoredArtifact {
  key: ArtifactKey
  modifiedAt: number
}

/** Where the file artifact store of a data dir lives. */
export function artifactsDirOf(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'artifacts')
}

export class FileArtifactStore implements ArtifactStore {
  private constructor(readonly root: string) {}

  /** Opens (creating if needed) the store under `<dataDir>/artifacts`; fails if it is not writable. */
  static async open(dataDir: string): Promise<FileArtifactStore> {
    const root = artifactsDirOf(dataDir)
    try {
      createPrivateDir(dataDir) // the kit's data dir is created 0700 by whoever creates it first
      await mkdir(path.join(root, INCOMING_DIR), {recursive: true, mode: 0o700})
      await access(root, fsConstants.W_OK)
    } catch (error) {
      throw new KitError('store_unavailable', `artifact store ${root} is not usable: ${(error as Error).message}`, 'artifact_store_unavailable')
    }
    return new FileArtifactStore(root)
  }

  async put(kind: ArtifactKind, bytes: Uint8Array): Promise<ArtifactKey> {
    const sha256 = sha256Hex(bytes)
    const key = artifactKeyFor(kind, sha256)
    const file = this.fileOf(key)
    if (await this.holdsIntactCopy(file, sha256, bytes.byteLength)) {
      // Renewed so cleanup, which spares recently put objects, keeps it until the version naming it commits.
      const now = new Date()
      await utimes(file, now, now)
      return key
    }
    const directory = path.dirname(file)
    const firstCreated = await mkdir(directory, {recursive: true, mode: 0o700})
    // Readers see the whole artifact or none; the temp file sits in `.incoming/`, never read as one.
    await writeFileAtomically(file, bytes, {temporaryDir: path.join(this.root, INCOMING_DIR)})
    // The rename is durable; directories mkdir just created need their own entries synced too.
    if (firstCreated !== undefined) {
      for (let dir = path.dirname(directory); ; dir = path.dirname(dir)) {
        await syncPath(dir)
        if (dir === path.dirname(firstCreated)) break
      }
    }
    return key
  }

  async get(key: ArtifactKey, maxBytes: number): Promise<Buffer> {
    const {kind, sha256} = parseKeyOrThrow(key)
    let handle: FileHandle
    try {
      handle = await open(this.fileOf(key), 'r')
    } catch (error) {
      if (isMissing(error)) throw new ArtifactError('artifact_missing', key, `${kind} artifact ${key} is missing`)
      throw error
    }
    try {
      const {size} = await handle.stat()
      if (size > maxBytes) {
        throw new ArtifactError('artifact_too_large', key, overLimitMessage(`${kind} artifact ${key}`, size, maxBytes))
      }
      const bytes = await readExactly(handle, size)
      if (sha256Hex(bytes) !== sha256) {
        throw new ArtifactError('artifact_corrupt', key, `${kind} artifact ${key} does not hash to its key`)
      }
      return bytes
    } finally {
      await handle.close()
    }
  }

  async has(key: ArtifactKey): Promise<boolean> {
    parseKeyOrThrow(key)
    try {
      return (await stat(this.fileOf(key))).isFile()
    } catch (error) {
      if (isMissing(error)) return false
      throw error
    }
  }

  async delete(key: ArtifactKey): Promise<void> {
    parseKeyOrThrow(key)
    try {
      await unlink(this.fileOf(key))
    } catch (error) {
      if (!isMissing(error)) throw error
    }
  }

  async *list(kind: ArtifactKind): AsyncIterable<StoredArtifact> {
    const kindDir = path.join(this.root, kind, 'sha256')
    for (const shard of (await readdirIfAny(kindDir)).sort()) {
      for (const name of (await readdirIfAny(path.join(kindDir, shard))).sort()) {
        const key = `${kind}/sha256/${shard}/${name}`
        if (!parseArtifactKey(key)) continue // not ours (an editor's backup file, say): never listed, never deleted
        const modifiedAt = await this.modifiedAt(key)
        if (modifiedAt !== null) yield {key, modifiedAt}
      }
    }
  }

  async deleteIfNotPutSince(key: ArtifactKey, cutoff: number): Promise<boolean> {
    const modifiedAt = await this.modifiedAt(key)
    if (modifiedAt !== null && modifiedAt > cutoff) return false
    await this.delete(key)
    return true
  }

  private async modifiedAt(key: ArtifactKey): Promise<number | null> {
    try {
      return (await stat(this.fileOf(key))).mtimeMs
    } catch (error) {
      if (isMissing(error)) return null
      throw error
    }
  }

  private fileOf(key: ArtifactKey): string {
    return path.join(this.root, ...key.split('/'))
  }

  /** True when the file is there with the right bytes; a damaged copy is replaced by the next put. */
  private async holdsIntactCopy(file: string, sha256: string, size: number): Promise<boolean> {
    let handle: FileHandle
    try {
      handle = await open(file, 'r')
    } catch (error) {
      if (isMissing(error)) return false
      throw error
    }
    try {
      if ((await handle.stat()).size !== size) return false
      return sha256Hex(await handle.readFile()) === sha256
    } finally {
      await handle.close()
    }
  }
}

function parseKeyOrThrow(key: string): {kind: ArtifactKind; sha256: string} {
  const parsed = parseArtifactKey(key)
  if (!parsed) throw new ArtifactError('artifact_key_invalid', key, `${JSON.stringify(key)} is not an artifact key`)
  return parsed
}

async function readExactly(handle: FileHandle, size: number): Promise<Buffer> {
  const buffer = Buffer.alloc(size)
  let offset = 0
  while (offset < size) {
    const {bytesRead} = await handle.read(buffer, offset, size - offset, offset)
    if (bytesRead === 0) break
    offset += bytesRead
  }
  // A file that shrank under us is simply a shorter (and therefore wrong-hashing) artifact.
  return buffer.subarray(0, offset)
}

async function readdirIfAny(dir: string): Promise<string[]> {
  try {
    return await readdir(dir)
  } catch (error) {
    if (isMissing(error)) return []
    throw error
  }
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT'
}
