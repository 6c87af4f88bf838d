// Files the package ships beside its code (fixtures/). The built CLI is bundled into chunks at
// varying depths under dist/, so the root is found by its package.json, not by a fixed `../..`.
import {existsSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

function findPackageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir)
    if (parent === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`)
    dir = parent
  }
  return dir
}

/** A path inside the installed package, e.g. `packagePath('fixtures', 'templates')`. */
export function packagePath(...segments: string[]): string {
  return path.join(findPackageRoot(), ...segments)
}
