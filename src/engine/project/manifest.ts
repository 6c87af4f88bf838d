// The Worker project format. A project is a directory holding `edgeworker.json`:
//
//   {
//     "name": "hello",                                   1–64 of [A-Za-z0-9._-], starting alphanumeric
//     "main": "index.js",                                the entry module; must be listed in "modules"
//     "modules": ["index.js", "lib/util.js"],            ES modules (.js/.mjs), normalized relative paths
//     "compatibilityDate": "2026-11-01",                 workerd compatibility date, YYYY-MM-DD
//     "builderPolicy": "department-worker-project-v2.9", see ../capabilities.ts
//     "durableObjects": [{"binding": "COUNTER", "className": "Counter"}],   optional
//     "staticData": {"greeting": "hi"},                  optional JSON object
//     "dependencies": {"left-pad": "1.3.0"}              optional name → version (recorded in the SBOM)
//   }
//
// and optionally `edgeworker.lock.json`: {"lockfileVersion": 1, "packages": {name: {"version", "integrity"?}}}.
// Unknown keys are refused everywhere. Every refusal is one `usage` line naming the file and the key.
// Both files are parsed strictly (../../util/strict-json.ts: no duplicate keys, no invalid UTF-8,
// bounded nesting) and may be at most 64 KiB: a manifest is stored in every version row.
import {lstat, readdir, readFile, realpath, stat} from 'node:fs/promises'
import path from 'node:path'
import {z} from 'zod'
import {KitError} from '../../errors.js'
import {formatByteSize, overLimitMessage} from '../../artifacts/size.js'
import {parseStrictJson} from '../../util/strict-json.js'
import {isKnownBuilderPolicy, unknownBuilderPolicyMessage} from '../capabilities.js'

export const MANIFEST_FILE = 'edgeworker.json'
export const LOCK_FILE = 'edgeworker.lock.json'
/** Directories the project walk (and so the project archive) leaves out at any depth. */
const EXCLUDED_DIRECTORIES: ReadonlySet<string> = new Set(['.git', 'node_modules'])
/** Largest edgeworker.json or edgeworker.lock.json: part of the format, the same for every kit. */
export const MAX_PROJECT_JSON_BYTES = 64 * 1024

const identifier = z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$]*$/, {error: 'must be a JavaScript identifier'})
const jsonObject = z.record(z.string(), z.json())

const manifestSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    error: 'must be 1–64 characters of letters, digits, ".", "_" or "-", starting with a letter or digit',
  }),
  main: z.string(),
  modules: z
    .array(z.string().regex(/\.m?js$/, {error: 'must name an ES module file (.js or .mjs)'}))
    .min(1, {error: 'must list at least one module'}),
  compatibilityDate: z.string().refine(isCalendarDate, {error: 'must be a date written YYYY-MM-DD'}),
  builderPolicy: z.string(),
  durableObjects: z.array(z.strictObject({binding: identifier, className: identifier})).optional(),
  staticData: jsonObject.optional(),
  dependencies: z
    .record(
      z.string().regex(/^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/, {error: 'must be a package name'}),
      z.string().min(1).max(256),
    )
    .optional(),
})

const lockSchema = z.strictObject({
  lockfileVersion: z.literal(1),
  packages: z.record(z.string(), z.strictObject({version: z.string().min(1), integrity: z.string().min(1).optional()})),
})

export type WorkerManifest = z.infer<typeof manifestSchema>
export type WorkerLock = z.infer<typeof lockSchema>
export type JsonObject = z.infer<typeof jsonObject>

/** A regular file of the project: its path relative to the project root (forward slashes) and bytes. */
export interface ProjectFile {
  path: string
  bytes: Buffer
}

export interface WorkerProject {
  /** The project directory, symlinks resolved. */
  root: string
  manifest: WorkerManifest
  lock: WorkerLock | null
  /** Every regular file, sorted by path, read once: the archive and the bundle share these bytes. */
  files: ProjectFile[]
  /** The modules in module-tuple order (see moduleTupleOf). */
  modules: ProjectFile[]
}

/**
 * The module order of a version: main first, then the others sorted. Fixed by the manifest alone,
 * so listing modules in another order changes nothing downstream of the manifest digest.
 */
export function moduleTupleOf(manifest: WorkerManifest): string[] {
  return [manifest.main, ...manifest.modules.filter((name) => name !== manifest.main).sort()]
}

/**
 * Validates manifest data (already JSON-parsed) that claims to come from `source`: shape, builder
 * policy, module paths, duplicates, main among the modules. Does not touch the file system.
 */
export function parseManifest(data: unknown, source = MANIFEST_FILE): WorkerManifest {
  const manifest = parseWithSchema(manifestSchema, data, source)
  if (!isKnownBuilderPolicy(manifest.builderPolicy)) {
    throw new KitError('usage', `${source}: key "builderPolicy": ${unknownBuilderPolicyMessage(manifest.builderPolicy)}`)
  }
  for (const name of manifest.modules) {
    const problem = modulePathProblem(name)
    if (problem) throw new KitError('usage', `${source}: module path ${JSON.stringify(name)} ${problem}`)
  }
  const duplicateModule = firstDuplicate(manifest.modules)
  if (duplicateModule !== undefined) {
    throw new KitError('usage', `${source}: key "modules" lists ${JSON.stringify(duplicateModule)} more than once`)
  }
  if (!manifest.modules.includes(manifest.main)) {
    throw new KitError('usage', `${source}: key "main" (${JSON.stringify(manifest.main)}) is not listed in "modules"`)
  }
  const duplicateBinding = firstDuplicate((manifest.durableObjects ?? []).map((object) => object.binding))
  if (duplicateBinding !== undefined) {
    throw new KitError('usage', `${source}: key "durableObjects" binds ${JSON.stringify(duplicateBinding)} more than once`)
  }
  return manifest
}

export function parseLock(data: unknown, source = LOCK_FILE): WorkerLock {
  return parseWithSchema(lockSchema, data, source)
}

/**
 * Reads and validates the project at `projectDir`. Every problem is a one-line `usage` KitError.
 * `maxFilesBytes` bounds the project's files in total, checked from their sizes before any is read.
 */
export async function loadWorkerProject(projectDir: string, maxFilesBytes: number): Promise<WorkerProject> {
  const root = await resolveProjectRoot(projectDir)
  const manifestBytes = await readProjectJsonFile(root, MANIFEST_FILE)
  if (manifestBytes === null) throw new KitError('usage', `no ${MANIFEST_FILE} in ${root}`)
  const manifest = parseManifest(parseJson(manifestBytes, MANIFEST_FILE))
  const lockBytes = await readProjectJsonFile(root, LOCK_FILE)
  const lock = lockBytes === null ? null : parseLock(parseJson(lockBytes, LOCK_FILE))

  const files = await readProjectFiles(root, maxFilesBytes)
  const byPath = new Map(files.map((file) => [file.path, file]))
  // The walk reads the manifest again; a manifest edited mid-build would make a self-contradicting version.
  if (!byPath.get(MANIFEST_FILE)?.bytes.equals(manifestBytes) || !sameBytes(byPath.get(LOCK_FILE)?.bytes, lockBytes)) {
    throw new KitError('usage', `${MANIFEST_FILE} or ${LOCK_FILE} changed while the project was read; try again`)
  }
  const modules: ProjectFile[] = []
  for (const name of moduleTupleOf(manifest)) {
    const file = byPath.get(name)
    if (!file) {
      const problem = await missingModuleProblem(root, name)
      throw new KitError('usage', `${MANIFEST_FILE}: module ${JSON.stringify(name)} ${problem}`)
    }
    modules.push(file)
  }
  return {root, manifest, lock, files, modules}
}

async function resolveProjectRoot(projectDir: string): Promise<string> {
  const absolute = path.resolve(projectDir)
  try {
    if (!(await stat(absolute)).isDirectory()) {
      throw new KitError('usage', `project directory ${absolute} is not a directory`)
    }
    return await realpath(absolute)
  } catch (error) {
    if (isMissing(error)) throw new KitError('usage', `project directory ${absolute} does not exist`)
    throw error
  }
}

/** The bytes of a top-level JSON file, or null when it does not exist. It must be a regular file. */
async function readProjectJsonFile(root: string, name: string): Promise<Buffer | null> {
  const file = path.join(root, name)
  try {
    const stats = await lstat(file)
    if (!stats.isFile()) throw new KitError('usage', `${file} must be a regular file`)
    if (stats.size > MAX_PROJECT_JSON_BYTES) throw new KitError('usage', overLimitMessage(name, stats.size, MAX_PROJECT_JSON_BYTES))
    return await readFile(file)
  } catch (error) {
    if (isMissing(error)) return null
    throw error
  }
}

function parseJson(bytes: Buffer, source: string): unknown {
  // Checked again on the bytes read: the file may have grown since lstat.
  if (bytes.length > MAX_PROJECT_JSON_BYTES) throw new KitError('usage', overLimitMessage(source, bytes.length, MAX_PROJECT_JSON_BYTES))
  try {
    return parseStrictJson(bytes)
  } catch (error) {
    throw new KitError('usage', `${source} is not valid JSON: ${(error as Error).message}`)
  }
}

/**
 * Every regular file under `root`, sorted by path. Symlinks, sockets and the like are skipped and
 * symlinked directories are not followed, so nothing outside the project can enter a version.
 */
async function readProjectFiles(root: string, maxFilesBytes: number): Promise<ProjectFile[]> {
  const found: string[] = []
  let total = 0
  const walk = async (relativeDir: string): Promise<void> => {
    const entries = await readdir(path.join(root, relativeDir), {withFileTypes: true})
    for (const entry of entries) {
      const relative = relativeDir === '' ? entry.name : `${relativeDir}/${entry.name}`
      if (entry.isDirectory() && !EXCLUDED_DIRECTORIES.has(entry.name)) await walk(relative)
      else if (entry.isFile()) {
        total += (await lstat(path.join(root, relative))).size
        if (total > maxFilesBytes) {
          throw new KitError('usage', `the project's files exceed ${formatByteSize(maxFilesBytes)} before compression (at ${relative}); deploy.project_files_max_bytes sets the limit`)
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
async function missingModuleProblem(root: string, name: string): Promise<string> {
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

/** Why a module path is unacceptable, or null. Paths are relative, forward-slashed, normalized. */
function modulePathProblem(name: string): string | null {
  const segments = name.split('/')
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name) || segments.includes('..')) return 'escapes the project directory'
  if (name.includes('\\')) return 'must use forward slashes'
  if (segments.some((segment) => segment === '' || segment === '.')) {
    return `is not a normalized relative path (write ${JSON.stringify(path.posix.normalize(name).replace(/^\.\//, ''))})`
  }
  return null
}

function parseWithSchema<Schema extends z.ZodType>(schema: Schema, data: unknown, source: string): z.infer<Schema> {
  // reportInput lets describeIssue tell a missing key (input undefined) from a wrong one.
  const result = schema.safeParse(data, {reportInput: true})
  if (result.success) return result.data
  const issue = result.error.issues[0]!
  throw new KitError('usage', `${source}: ${describeIssue(issue)}`)
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys.map((key) => JSON.stringify(formatKeyPath([...issue.path, key])))
    return `unknown key${keys.length > 1 ? 's' : ''} ${keys.join(', ')}`
  }
  const key = issue.path.length === 0 ? 'the file' : `key ${JSON.stringify(formatKeyPath(issue.path))}`
  if (issue.path.length === 0 && issue.code === 'invalid_type') return 'must be a JSON object'
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? `${key} is required` : `${key} must be ${article(issue.expected)}`
    case 'invalid_value':
      return `${key} must be ${issue.values.map((value) => JSON.stringify(value)).join(' or ')}`
    case 'too_small':
      return issue.origin === 'string' ? `${key} must not be empty` : `${key} ${issue.message}`
    case 'too_big':
      return `${key} is too long`
    case 'invalid_key':
      return `${key} ${issue.issues[0]?.message ?? 'is not an allowed key'}`
    default:
      // Refinements carry their own wording (e.g. "must be a date written YYYY-MM-DD").
      return `${key} ${issue.message}`
  }
}

/** `["durableObjects", 0, "binding"]` → `durableObjects[0].binding` */
function formatKeyPath(keyPath: readonly PropertyKey[]): string {
  return keyPath
    .map((part, index) => (typeof part === 'number' ? `[${part}]` : index === 0 ? String(part) : `.${String(part)}`))
    .join('')
}

function article(expected: string): string {
  const noun = expected === 'record' ? 'object' : expected
  return /^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`
}

function isCalendarDate(value: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return false
  const date = new Date(`${value}T00:00:00Z`)
  return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(value)
}

function firstDuplicate(values: readonly string[]): string | undefined {
  const seen = new Set<string>()
  for (const value of values) {
    if (seen.has(value)) return value
    seen.add(value)
  }
  return undefined
}

function sameBytes(a: Buffer | undefined, b: Buffer | null): boolean {
  return a === undefined || b === null ? a === undefined && b === null : a.equals(b)
}

function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate)
  return relative !== '' && relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative)
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT'
}
