// The edge host's data snapshot inside a backup (host/snapshot.tar): reading its own manifest
// (snapshot.json, the first entry) and extracting it into a new host data dir, verified file by file.
import {chmod, rm} from 'node:fs/promises'
import path from 'node:path'
import {list as listTar, extract as extractTar, type ReadEntry} from 'tar'
import {KitError} from '../../errors.js'
import {fileDigest} from '../../file-digest.js'
import {filesUnder} from './directories.js'
import {SNAPSHOT_MANIFEST_FILE, snapshotManifestSchema, type SnapshotManifest} from '../../protocol/management-api.js'
import {parseStrictJson} from '../../util/strict-json.js'

/** snapshot.json of a snapshot tar; a usage error when it is missing or malformed. */
export async function readSnapshotManifest(tarFile: string): Promise<SnapshotManifest> {
  let text: string | null = null
  try {
    await listTar({
      file: tarFile,
      strict: true,
      onReadEntry: (entry: ReadEntry) => {
        if (entry.path !== SNAPSHOT_MANIFEST_FILE) return entry.resume()
        const chunks: Buffer[] = []
        entry.on('data', (chunk: Buffer) => chunks.push(chunk))
        entry.on('end', () => (text = Buffer.concat(chunks).toString('utf8')))
      },
    })
  } catch (error) {
    throw new KitError('usage', `${tarFile} is not a readable host snapshot: ${(error as Error).message}`)
  }
  if (text === null) throw new KitError('usage', `${tarFile} holds no ${SNAPSHOT_MANIFEST_FILE}`)
  let json: unknown
  try {
    json = parseStrictJson(text)
  } catch (error) {
    throw new KitError('usage', `${SNAPSHOT_MANIFEST_FILE} in ${tarFile} is malformed: ${(error as Error).message}`)
  }
  const parsed = snapshotManifestSchema.safeParse(json)
  if (!parsed.success) throw new KitError('usage', `${SNAPSHOT_MANIFEST_FILE} in ${tarFile} is malformed: ${parsed.error.issues[0]!.message}`)
  return parsed.data
}

/**
 * Extracts the snapshot into `dir` (an existing, empty directory) and checks that exactly the files
 * its manifest lists arrived, each with its digest. Only regular files and directories are taken.
 */
export async function extractSnapshot(tarFile: string, dir: string, manifest: SnapshotManifest): Promise<void> {
  await extractTar({
    file: tarFile,
    cwd: dir,
    strict: true,
    filter: (_path, entry) => 'type' in entry && (entry.type === 'File' || entry.type === 'Directory'),
  })
  await rm(path.join(dir, SNAPSHOT_MANIFEST_FILE))
  const arrived = await filesUnder(dir)
  const expected = new Set(manifest.files.map((file) => file.path))
  const unexpected = arrived.find((file) => !expected.has(file))
  if (unexpected) throw new KitError('usage', `the host snapshot holds ${unexpected}, which its ${SNAPSHOT_MANIFEST_FILE} does not list`)
  const present = new Set(arrived)
  for (const file of manifest.files) {
    if (!present.has(file.path)) throw new KitError('usage', `the host snapshot lacks ${file.path}`)
    const actual = await fileDigest(path.join(dir, file.path))
    if (actual.size !== file.size || actual.sha256 !== file.sha256) throw new KitError('usage', `the host snapshot's ${file.path} does not match its digest`)
  }
  // A host data dir holds secrets (host.sqlite, identity.key): owner-only, whatever the archive said.
  for (const file of arrived) {
    await chmod(path.join(dir, file), 0o600)
    for (let parent = path.dirname(file); parent !== '.'; parent = path.dirname(parent)) await chmod(path.join(dir, parent), 0o700)
  }
}
