// The files of a project directory: every regular file (symlinks and excluded directories
// skipped, so nothing outside the project enters a version), within the size limit, and why a
// listed module is not among them.
import {lstat, readdir, readFile, realpath} from 'node:fs/promises'
import path from 'node:path'
import {formatByteSize} from '../../artifacts/size.js'
import {KitError} from '../../errors.js'
import {isInside} from './build-rules.js'

const EXCLUDED_DIRECTORIES: ReadonlySet<string> = new Set(['.git', 'node_modules'])

/** A regular file of the project: its path relative to the project root (forward slashes) and bytes. */
export interface ProjectFile {
  path: string
  bytes: Buffer
}

/**
 * Every regular file under `root`, sorted by path. Symlinks, sockets and the like are skipped and
 * symlinked directories are not followed, so nothing outside the project can enter a version.
 */
export async function readProjectFiles(root: string, maxFilesBytes: number, assetsDirectory: string | null): Promise<ProjectFile[]> {
  const found: string[] = []
  let total = 0
  const walk = async (relativeDir: string): Promise<void> => {
    const entries = await readdir(path.join(root, relativeDir), {withFileTypes: true})
    for (const entry of entries) {
      const relative = relativeDir === '' ? entry.name : `${relativeDir}/${entry.name}`
      if (entry.isDirectory() && !EXCLUDED_DIRECTORIES.has(entry.name) && relative !== assetsDirectory) await walk(relative)
      else if (entry.isFile()) {
        total += (await lstat(path.join(root, relative))).size
        if (total > maxFilesBytes) {
          throw new KitError(
            'usage',
            `the project's files exceed ${formatByteSize(maxFilesBytes)} before compression (at ${relative}); deploy.project_files_max_bytes sets the limit`,
          )
        }
        found.push(relative)
      }
    }
  }
  await walk('')
  const files: ProjectFile[] = []
  for (const relative of found) files.push({path: relative, bytes: await readFile(path.join(root, relative))})
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}

/** Why a listed module is not among the project's files, for the error line. */
export async function missingModuleProblem(root: string, name: string): Promise<string> {
  const expected = path.join(root, ...name.split('/'))
  let resolved: string
  try {
    resolved = await realpath(expected)
  } catch (error) {
    if (isMissing(error)) return `does not exist in ${root}`
    throw error
  }
  if (!isInside(root, resolved)) return `escapes the project directory through a symlink (to ${resolved})`
  if (resolved !== expected) return 'is reached through a symlink; modules must be regular files'
  if (name.split('/').some((segment) => EXCLUDED_DIRECTORIES.has(segment))) {
    return `is inside an excluded directory (${[...EXCLUDED_DIRECTORIES].join(', ')})`
  }
  return 'is not a regular file'
}

export function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT'
}
