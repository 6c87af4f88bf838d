// The directories a backup writes: a backup directory and a restored host data dir must be new or
// empty (nothing of the operator's is ever overwritten), private to the user (they hold secrets),
// and are taken away again when the command fails half-way.
import {chmod, mkdir, readdir, rm, stat} from 'node:fs/promises'
import path from 'node:path'
import {KitError} from '../../errors.js'

export interface FreshDirectory {
  path: string
  /** It existed (empty) before: a failure empties it rather than removing it. */
  existed: boolean
}

/** Refuses (usage, nothing written) a path that is a file or a non-empty directory. */
export async function freshDirectory(dir: string, what: string): Promise<FreshDirectory> {
  const resolved = path.resolve(dir)
  const found = await stat(resolved).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null
    throw error
  })
  if (found === null) return {path: resolved, existed: false}
  if (!found.isDirectory()) throw new KitError('usage', `${what} ${resolved} is not a directory`)
  if ((await readdir(resolved)).length > 0) throw new KitError('usage', `${what} ${resolved} is not empty; give a new or empty directory`)
  return {path: resolved, existed: true}
}

export async function createPrivateDirectory(dir: FreshDirectory): Promise<void> {
  await mkdir(dir.path, {recursive: true, mode: 0o700})
  await chmod(dir.path, 0o700)
}

/** Takes away what a failed command wrote. */
export async function discardDirectory(dir: FreshDirectory): Promise<void> {
  if (!dir.existed) {
    await rm(dir.path, {recursive: true, force: true})
    return
  }
  const entries = await readdir(dir.path).catch(() => [])
  await Promise.all(entries.map((entry) => rm(path.join(dir.path, entry), {recursive: true, force: true})))
}

/** Regular files under `dir`, as sorted relative paths. */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, {withFileTypes: true, recursive: true})
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
    .sort()
}
