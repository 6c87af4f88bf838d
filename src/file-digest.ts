// SHA-256 and size of a file, streamed (bounded memory whatever the size). Shared by the edge host's
// data snapshots and the kit's backups.
import {createHash} from 'node:crypto'
import {createReadStream} from 'node:fs'

export interface FileDigest {
  size: number
  sha256: string
}

export async function fileDigest(file: string): Promise<FileDigest> {
  const hash = createHash('sha256')
  let size = 0
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    size += chunk.length
    hash.update(chunk)
  }
  return {size, sha256: hash.digest('hex')}
}
