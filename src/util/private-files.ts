// Files that hold secrets (the kit's SQLite store with the pairing secret; the host's state with the
// pairing secret, Worker secrets and service-account passwords) and the directories they live in
// are private to their owner: created 0700 / 0600 whatever the umask, and refused — as ssh refuses
// a readable private key — when found open to group or others, with the command that fixes it.
// SQLite creates its -wal and -shm files with the mode of the database file, so they follow.
import {chmodSync, closeSync, mkdirSync, openSync, statSync} from 'node:fs'
import path from 'node:path'
import {KitError} from '../errors.js'

/** Bits that let group or others read, write or enter. */
const SHARED_BITS = 0o077

/** Creates `dir` (and missing parents) 0700, or refuses an existing one group or others can use. */
export function ensurePrivateDir(dir: string): void {
  if (!createPrivateDir(dir)) assertPrivate(dir, 'directory')
}

/** Creates `dir` (and missing parents) 0700 when it is missing; true when this call created it. */
export function createPrivateDir(dir: string): boolean {
  let created: string | undefined
  try {
    created = mkdirSync(dir, {recursive: true, mode: 0o700})
  } catch (error) {
    throw new KitError('store_unavailable', `cannot create ${dir}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
  }
  if (created === undefined) return false
  // mkdir's mode passes through the umask; set it outright on every directory this call created.
  for (let each = dir; each.length >= created.length; each = path.dirname(each)) chmodSync(each, 0o700)
  return true
}

/** Creates `file` empty and 0600 when missing; otherwise refuses it if group or others can use it. */
export function ensurePrivateFile(file: string): void {
  if (!createPrivateFile(file)) assertPrivate(file, 'file')
}

/** Creates `file` empty and 0600 when missing; true when this call created it. */
export function createPrivateFile(file: string): boolean {
  let descriptor: number
  try {
    descriptor = openSync(file, 'wx', 0o600)
  } catch {
    // EEXIST: not ours to create. Anything else (a missing directory) is reported by whoever opens it.
    return false
  }
  closeSync(descriptor)
  chmodSync(file, 0o600)
  return true
}

/** Refuses a file or directory that group or others can use, naming the command that fixes it. */
export function assertPrivate(target: string, kind: 'file' | 'directory'): void {
  const mode = statSync(target).mode & 0o777
  if ((mode & SHARED_BITS) === 0) return
  const fix = kind === 'file' ? '600' : '700'
  throw new KitError(
    'config_invalid',
    `${target} holds secrets but is accessible to other users (mode ${mode.toString(8).padStart(4, '0')}); run \`chmod ${fix} ${target}\` and retry`,
  )
}
