// Whole-file replacement that survives a crash at any point: readers see the old file or the new
// one, never a torn write, and after return the new one survives a power loss too — the data is
// fsynced before the rename, and the directory after it (the rename itself lives in the directory).
import {randomUUID} from 'node:crypto'
import {open, rename, rm} from 'node:fs/promises'
import path from 'node:path'

export interface AtomicWriteOptions {
  /** File mode of the new file (before the umask, as for open(2)). Default 0o600: what the kit and the host write is theirs alone. */
  mode?: number
  /** Where the temporary file goes; must be on the same filesystem. Defaults to `file`'s directory. */
  temporaryDir?: string
}

export async function writeFileAtomically(file: string, data: string | Uint8Array, options: AtomicWriteOptions = {}): Promise<void> {
  const directory = path.dirname(file)
  const temporary = path.join(options.temporaryDir ?? directory, `.${path.basename(file)}.${process.pid}.${randomUUID()}.tmp`)
  try {
    const handle = await open(temporary, 'wx', options.mode ?? 0o600)
    try {
      await handle.writeFile(data)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(temporary, file)
  } catch (error) {
    await rm(temporary, {force: true})
    throw error
  }
  await syncPath(directory)
}

/** fsync of a file or directory: makes its data (a directory's: its entries, e.g. a rename) durable. */
export async function syncPath(target: string): Promise<void> {
  const handle = await open(target, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}
