// What esbuild took into a wrangler project's bundle, checked before anything is staged: every
// input is one of the project's own files or a file of an npm package the project (or a package it
// uses) imports by name, and every input is valid UTF-8 (esbuild, like workerd, would quietly put
// U+FFFD in place of bad bytes).
//
// Packages are found by module resolution wherever it finds them — in the project's node_modules,
// in a monorepo's hoisted node_modules above the project, through a workspace or pnpm symlink — and
// a package is the directory of the package.json that names it. A file reached by a relative or
// absolute path (or an alias or tsconfig `paths` entry) must be inside the project directory, real
// path compared, so a symlink out of the project is refused as well.
import {existsSync, readFileSync} from 'node:fs'
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import type {Metafile} from 'esbuild'
import {KitError} from '../../../errors.js'
import {isInside, utf8Problem} from '../build-rules.js'
import {isPolyfillInput} from './node-compat.js'

/** Whether a metafile input is a project or package file: not an empty `browser: false` stand-in, nor the kit's polyfills (./node-compat.ts). */
export function isFileInput(input: string): boolean {
  return !input.startsWith('(disabled):') && !isPolyfillInput(input)
}

/** Throws a one-line KitError('usage') for the first input from outside the project or not UTF-8. */
export async function checkBundleInputs(realRoot: string, metafile: Metafile): Promise<void> {
  const packageRoots = new Set<string>()
  const importedBy = new Map<string, {importer: string; specifier: string}>()
  const packageRootCache = new Map<string, string | null>()
  for (const [importer, entry] of Object.entries(metafile.inputs)) {
    for (const imported of entry.imports) {
      if (imported.external) continue
      const specifier = imported.original ?? imported.path
      if (!importedBy.has(imported.path)) importedBy.set(imported.path, {importer, specifier})
      const name = packageNameOf(specifier)
      if (name === null) continue
      const packageRoot = packageRootOf(path.resolve(realRoot, imported.path), name, packageRootCache)
      if (packageRoot !== null) packageRoots.add(packageRoot)
    }
  }
  const roots = [...packageRoots]
  const files = Object.keys(metafile.inputs).filter(isFileInput)
  for (const input of files) {
    const file = path.resolve(realRoot, input)
    if (isInside(realRoot, file) || roots.some((root) => isInside(root, file))) continue
    const by = importedBy.get(input)
    const how = by ? `${by.importer} imports ${JSON.stringify(by.specifier)}, which is` : `${input} is`
    throw new KitError(
      'usage',
      `bundling refused: ${how} ${file}, outside the project directory ${realRoot}; a bundle takes only the project's own files and npm packages`,
    )
  }
  for (const input of files) {
    const problem = utf8Problem(await readFile(path.resolve(realRoot, input)))
    if (problem) throw new KitError('usage', `bundling refused: ${input} ${problem}`)
  }
}

/** The package a bare specifier names (`hono/jsx` → `hono`, `@scope/pkg/x` → `@scope/pkg`), or null for a path. */
export function packageNameOf(specifier: string): string | null {
  if (/^[./#]/.test(specifier) || path.isAbsolute(specifier)) return null
  const segments = specifier.split('/')
  return specifier.startsWith('@') ? segments.slice(0, 2).join('/') : segments[0]!
}

/** The nearest directory above `file` whose package.json is named `name`, or null (cached per start directory). */
export function packageRootOf(file: string, name: string, cache: Map<string, string | null>): string | null {
  const key = `${name}\0${path.dirname(file)}`
  if (cache.has(key)) return cache.get(key)!
  let found: string | null = null
  for (let dir = path.dirname(file); found === null; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json')
    if (existsSync(manifest) && packageJsonName(manifest) === name) found = dir
    else if (path.dirname(dir) === dir) break
  }
  cache.set(key, found)
  return found
}

function packageJsonName(file: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as {name?: string}).name
  } catch {
    return undefined
  }
}

/** The directory of the package.json nearest above `file`, or null. */
export function nearestPackageDir(file: string): string | null {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir
    if (path.dirname(dir) === dir) return null
  }
}
