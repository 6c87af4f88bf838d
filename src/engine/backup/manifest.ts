// The backup directory and its manifest.json. Layout:
//
//   manifest.json              written last: a directory without it is not a backup
//   store/                     the store dump (SQLite: edgeworkers.sqlite; PostgreSQL: <table>.ndjson)
//   artifacts/<kind>/sha256/…  the artifact store, same layout as <data_dir>/artifacts
//   host/snapshot.tar          the edge host's data snapshot (see the protocol's "Data snapshot")
//   hosts/<12 hex>.tar         a kit of several hosts: each other host's snapshot (./host-snapshots.ts)
//
// The manifest lists every other file with its size and SHA-256; a restore checks them all before
// it changes anything. It holds no secret — but the store dump and the host snapshot do (the pairing
// secret, Worker secrets): keep backups private (the directory is created 0700, files 0600).
import {readFile, stat, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {z} from 'zod'
import {KitError} from '../../errors.js'
import {fileDigest} from '../../file-digest.js'
import {snapshotPathSchema} from '../../protocol/management-api.js'
import {dumpFiles} from '../../store/backup/index.js'
import {parseStrictJson} from '../../util/strict-json.js'

export const MANIFEST_FILE = 'manifest.json'
export const STORE_DIR = 'store'
export const ARTIFACTS_DIR = 'artifacts'
export const HOST_SNAPSHOT_FILE = 'host/snapshot.tar'
const OTHER_HOST_SNAPSHOT = /^hosts\/[0-9a-f]{12}\.tar$/

/** Where the snapshot of a kit's host other than the first goes. */
export function hostSnapshotFileOf(hostScope: string): string {
  return `hosts/${hostScope.replace(/^onprem:/, '')}.tar`
}
const FORMAT = 'edgeworkers-backup'

const hex64 = z.string().regex(/^[0-9a-f]{64}$/)

export const backupManifestSchema = z.strictObject({
  format: z.literal(FORMAT),
  formatVersion: z.literal(1),
  createdAt: z.iso.datetime(),
  /** The backup fence the copy was taken under. */
  fenceId: z.string().min(1),
  /** The kit scope whose host was snapshotted. */
  scope: z.string().regex(/^onprem:[0-9a-f]{12}$/),
  host: z.strictObject({
    /** SHA-256 of the paired host's identity key: the host a restore brings back. */
    fingerprint: hex64,
    snapshot: z.literal(HOST_SNAPSHOT_FILE),
  }),
  /** A kit of several hosts: every host snapshotted (the first is `host`'s), and those that did not answer. */
  hosts: z
    .array(
      z.strictObject({
        host: z.string().regex(/^onprem:[0-9a-f]{12}$/),
        fingerprint: hex64,
        snapshot: z.union([z.literal(HOST_SNAPSHOT_FILE), z.string().regex(OTHER_HOST_SNAPSHOT)]),
      }),
    )
    .optional(),
  hostsMissing: z.array(z.strictObject({host: z.string().regex(/^onprem:[0-9a-f]{12}$/), error: z.string()})).optional(),
  store: z.strictObject({
    backend: z.enum(['sqlite', 'postgres']),
    migrations: z.array(z.string()),
    tables: z.array(z.strictObject({name: z.string().regex(/^[a-z_][a-z0-9_]*$/), rows: z.number().int().min(0)})),
  }),
  files: z.array(z.strictObject({path: snapshotPathSchema, size: z.number().int().min(0), sha256: hex64})),
})
export type BackupManifest = z.infer<typeof backupManifestSchema>
export type BackupFile = BackupManifest['files'][number]

export async function writeManifest(dir: string, manifest: BackupManifest): Promise<void> {
  await writeFile(path.join(dir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`, {mode: 0o600, flag: 'wx'})
}

/** Size and SHA-256 of each file, in the order given. */
export async function describeFiles(dir: string, files: readonly string[]): Promise<BackupFile[]> {
  const described: BackupFile[] = []
  for (const file of files) described.push({path: file, ...(await fileDigest(path.join(dir, file)))})
  return described
}

/**
 * The manifest of the backup in `dir`, once every file it lists has the size and digest it records.
 * Anything else — no directory, no or a malformed manifest, a missing, changed or corrupt file — is
 * a one-line usage error.
 */
export async function readVerifiedManifest(dir: string): Promise<BackupManifest> {
  const where = path.join(dir, MANIFEST_FILE)
  let text: string
  try {
    text = await readFile(where, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR')
      throw new KitError('usage', `${dir} is not a backup: it has no ${MANIFEST_FILE} (or the backup did not finish)`)
    throw error
  }
  let json: unknown
  try {
    json = parseStrictJson(text)
  } catch (error) {
    throw new KitError('usage', `${where} is malformed: ${(error as Error).message}`)
  }
  const parsed = backupManifestSchema.safeParse(json)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw new KitError('usage', `${where} is malformed: ${issue.path.join('.') || '(manifest)'}: ${issue.message}`)
  }
  const manifest = parsed.data
  const listed = new Set(manifest.files.map((file) => file.path))
  if (listed.size !== manifest.files.length) throw new KitError('usage', `${where} is malformed: a file is listed twice`)
  for (const required of [HOST_SNAPSHOT_FILE, ...(manifest.hosts ?? []).map((host) => host.snapshot), ...storeFilesOf(manifest)]) {
    if (!listed.has(required)) throw new KitError('usage', `${where} is malformed: it does not list ${required}`)
  }
  for (const file of manifest.files) {
    const location = path.join(dir, file.path)
    const isFile = await stat(location).then(
      (found) => found.isFile(),
      () => false,
    )
    if (!isFile) throw new KitError('usage', `backup file ${file.path} is missing from ${dir}`)
    const actual = await fileDigest(location)
    if (actual.size !== file.size || actual.sha256 !== file.sha256) {
      throw new KitError('usage', `backup file ${file.path} does not match its digest in ${MANIFEST_FILE} (corrupt or changed); nothing was restored`)
    }
  }
  return manifest
}

/** The store dump's files, relative to the backup directory. */
export function storeFilesOf(manifest: Pick<BackupManifest, 'store'>): string[] {
  return dumpFiles(manifest.store).map((file) => `${STORE_DIR}/${file}`)
}
