// Data snapshots of a fenced host (GET /v1/snapshot, see ../../protocol/management-api.ts): the state,
// the identity key, every Durable Object file and the static asset files (immutable, by content), staged under runtime/snapshots/<id>/ and streamed
// as a tar. SQLite files go through the online backup API — workerd keeps writing Durable Objects
// while the data plane serves, and a raw copy of a file being written may be torn. The staging dir
// is private to the host user (it holds secrets) and removed once the stream ends; one left by a
// crash is removed at the next start.
import {randomUUID} from 'node:crypto'
import {existsSync} from 'node:fs'
import {copyFile, mkdir, readdir, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Readable} from 'node:stream'
import Database from 'better-sqlite3'
import {create as createTar} from 'tar'
import {fileDigest} from '../../file-digest.js'
import {SNAPSHOT_MANIFEST_FILE, type SnapshotManifest} from '../../protocol/management-api.js'
import {ASSETS_DIR, INCOMING_DIR} from '../assets/files.js'
import {IDENTITY_KEY_FILE, type HostIdentity} from '../identity.js'
import {type HostFence, type HostState, sealSnapshotCopy, STATE_FILE} from '../state/host-state.js'

const STAGING_DIR = path.join('runtime', 'snapshots')
const DURABLE_OBJECTS_DIR = 'do'
/** SQLite's companions of a live database: the backup copy already holds what they add. */
const SQLITE_COMPANION = /-(wal|shm|journal)$/

export interface SnapshotSource {
  dataDir: string
  state: HostState
  identity: HostIdentity
  /** The active fence the snapshot is taken under. */
  fence: HostFence
}

export interface StagedSnapshot {
  stream: Readable
  /** Removes the staged files; call once the stream ended or was abandoned. */
  dispose(): Promise<void>
}

export async function clearSnapshotLeftovers(dataDir: string): Promise<void> {
  await rm(path.join(dataDir, STAGING_DIR), {recursive: true, force: true})
}

/** Stages a snapshot and returns its tar stream: snapshot.json first, then the files it lists. */
export async function stageSnapshot(source: SnapshotSource): Promise<StagedSnapshot> {
  const dir = path.join(source.dataDir, STAGING_DIR, randomUUID())
  await mkdir(dir, {recursive: true, mode: 0o700})
  const dispose = () => rm(dir, {recursive: true, force: true})
  try {
    const files: string[] = []
    await source.state.backupTo(path.join(dir, STATE_FILE))
    sealSnapshotCopy(path.join(dir, STATE_FILE), source.fence.fenceId, Date.now())
    files.push(STATE_FILE)
    await copyFile(path.join(source.dataDir, IDENTITY_KEY_FILE), path.join(dir, IDENTITY_KEY_FILE))
    files.push(IDENTITY_KEY_FILE)
    for (const file of await filesUnder(source.dataDir, DURABLE_OBJECTS_DIR)) {
      if (SQLITE_COMPANION.test(file)) continue
      await mkdir(path.dirname(path.join(dir, file)), {recursive: true, mode: 0o700})
      if (file.endsWith('.sqlite')) await backUpSqlite(path.join(source.dataDir, file), path.join(dir, file))
      else await copyFile(path.join(source.dataDir, file), path.join(dir, file))
      files.push(file)
    }
    // The fence holds uploads back, so no asset file is being written; half-written ones are in .incoming.
    for (const file of await filesUnder(source.dataDir, ASSETS_DIR)) {
      if (file.startsWith(path.join(ASSETS_DIR, INCOMING_DIR, path.sep))) continue
      await mkdir(path.dirname(path.join(dir, file)), {recursive: true, mode: 0o700})
      await copyFile(path.join(source.dataDir, file), path.join(dir, file))
      files.push(file)
    }
    const manifest: SnapshotManifest = {
      formatVersion: 1,
      fenceId: source.fence.fenceId,
      scope: source.identity.scope,
      fingerprint: source.identity.fingerprint,
      createdAt: new Date().toISOString(),
      files: [],
    }
    for (const file of files) manifest.files.push({path: file, ...(await fileDigest(path.join(dir, file)))})
    await writeFile(path.join(dir, SNAPSHOT_MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`, {mode: 0o600})
    const stream = createTar({cwd: dir, portable: true, noDirRecurse: true}, [SNAPSHOT_MANIFEST_FILE, ...files]) as unknown as Readable
    return {stream, dispose}
  } catch (error) {
    await dispose()
    throw error
  }
}

async function backUpSqlite(source: string, target: string): Promise<void> {
  const db = new Database(source, {readonly: true, fileMustExist: true})
  try {
    await db.backup(target)
  } finally {
    db.close()
  }
}

/** Regular files under `root/sub`, as paths relative to `root`, sorted. */
async function filesUnder(root: string, sub: string): Promise<string[]> {
  if (!existsSync(path.join(root, sub))) return []
  const entries = await readdir(path.join(root, sub), {withFileTypes: true, recursive: true})
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)))
    .sort()
}
