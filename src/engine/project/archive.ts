// The project archive: a gzipped ustar of the project's regular files. It is built from bytes
// already in memory (the same bytes the bundle uses) with every varying field fixed — entries
// sorted by path, mode 0644, mtime 0, uid/gid 0, no user or group names, no directory entries —
// so the same files always give the same archive bytes on a given Node/zlib.
import {gzipSync} from 'node:zlib'
import {Header, Parser, Pax, type ReadEntry} from 'tar'
import type {ProjectFile} from './manifest.js'

const BLOCK_SIZE = 512
const FIXED_MTIME = new Date(0)

export function createProjectArchive(files: readonly ProjectFile[]): Buffer {
  const chunks: Buffer[] = []
  for (const file of [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    const header = new Header({
      path: file.path,
      type: 'File',
      mode: 0o644,
      uid: 0,
      gid: 0,
      uname: '',
      gname: '',
      size: file.bytes.length,
      mtime: FIXED_MTIME,
    })
    // encode() reports a path too long for ustar; a PAX record then carries the full path.
    if (header.encode()) chunks.push(new Pax({path: file.path}).encode())
    chunks.push(header.block!, file.bytes, Buffer.alloc(paddingAfter(file.bytes.length)))
  }
  chunks.push(Buffer.alloc(2 * BLOCK_SIZE)) // end-of-archive marker
  return gzipSync(Buffer.concat(chunks), {level: 9})
}

/** The regular files in an archive, in archive order. Rejects anything that is not a valid archive. */
export async function readProjectArchive(bytes: Uint8Array): Promise<ProjectFile[]> {
  return new Promise((resolve, reject) => {
    const files: ProjectFile[] = []
    const parser = new Parser({
      strict: true,
      onReadEntry: (entry: ReadEntry) => {
        if (entry.type !== 'File') {
          entry.resume()
          return
        }
        const chunks: Buffer[] = []
        entry.on('data', (chunk: Buffer) => chunks.push(chunk))
        entry.on('end', () => files.push({path: entry.path, bytes: Buffer.concat(chunks)}))
      },
    })
    parser.on('error', reject)
    parser.on('end', () => resolve(files))
    parser.end(Buffer.from(bytes))
  })
}

function paddingAfter(size: number): number {
  return (BLOCK_SIZE - (size % BLOCK_SIZE)) % BLOCK_SIZE
}
