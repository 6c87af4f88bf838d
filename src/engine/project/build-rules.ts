// The build-time refusals an edgeworker.json project and a wrangler project share, each stated
// once: nothing from outside the project directory enters a version (by a relative or absolute
// path, or through a symlink), a version has no more modules than the edge host accepts, and a
// module workerd reads as text is valid UTF-8 (workerd would read it with U+FFFD in place of the
// bad bytes and serve them). Each returns the problem as words for the caller's one-line error.
import {realpathSync} from 'node:fs'
import path from 'node:path'
import {MAX_SCRIPT_MODULES, type ModuleType} from '../../protocol/management-api.js'
import {firstInvalidUtf8Offset} from '../../util/strict-json.js'

/** Module types workerd decodes as UTF-8 text. */
const TEXT_MODULE_TYPES: ReadonlySet<ModuleType> = new Set(['esModule', 'commonJs', 'text', 'json'])

/** Whether `candidate` is strictly inside `root` (both absolute, compared as written). */
export function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate)
  return relative !== '' && relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative)
}

/**
 * Why the file at `file` may not enter a version of the project at `realRoot` (its real path), or
 * null: it must exist and its real path — symlinks followed — must lie inside the project.
 */
export function outsideProjectProblem(realRoot: string, file: string): string | null {
  let real: string
  try {
    real = realpathSync(file)
  } catch {
    return 'does not exist'
  }
  if (isInside(realRoot, real)) return null
  return real === path.resolve(file) ? `is outside the project directory ${realRoot}` : `escapes the project directory through a symlink (to ${real})`
}

/** Why a version of `count` modules would be refused by the host, or null. */
export function moduleCountProblem(count: number): string | null {
  return count > MAX_SCRIPT_MODULES ? `${count} modules; the edge host accepts at most ${MAX_SCRIPT_MODULES} per Worker` : null
}

/** Why a module of this type and content would not reach the Worker as written, or null. */
export function moduleTextProblem(type: ModuleType, bytes: Uint8Array): string | null {
  return TEXT_MODULE_TYPES.has(type) ? utf8Problem(bytes) : null
}

/** Why source text read as UTF-8 would change, or null. */
export function utf8Problem(bytes: Uint8Array): string | null {
  const offset = firstInvalidUtf8Offset(bytes)
  return offset === null ? null : `is not valid UTF-8 (at byte offset ${offset}); workerd would read it with replacement characters`
}
