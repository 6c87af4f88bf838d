// The Worker project format. A project is a directory holding `edgeworker.json`:
//
//   {
//     "name": "hello",                                   1–64 of [A-Za-z0-9._-], starting alphanumeric
//     "main": "index.js",                                the entry module's path; must be listed in "modules"
//     "modules": ["index.js", {"path": "page.html", "type": "text", "name": "page"}],
//                                                        normalized relative paths; type by extension unless given
//     "compatibilityDate": "2026-11-01",                 workerd compatibility date, YYYY-MM-DD
//     "compatibilityFlags": ["nodejs_compat"],           optional workerd flags (checked at build, see check.ts)
//     "builderPolicy": "department-worker-project-v2.9", see ../capabilities.ts
//     "durableObjects": [{"binding": "COUNTER", "className": "Counter"}],   optional
//     "kvNamespaces": [{"binding": "CACHE", "id": "cache"}],              optional, the host keeps the data
//     "d1Databases": [{"binding": "DB", "databaseName": "app", "id": "…"}], optional, the host keeps the data;
//                                                        also "migrationsDir", "migrationsTable" (wrangler's)
//     "r2Buckets": [{"binding": "FILES", "bucketName": "files"}],         optional, the host keeps the objects
//     "crons": ["*/5 * * * *"],                          optional cron triggers (UTC) running scheduled()
//     "queues": {"producers": [{"binding": "JOBS", "queue": "jobs"}],       optional, the host keeps the messages
//                "consumers": [{"queue": "jobs", "maxBatchSize": 10}]},      see ../../protocol/api/queues.ts
//     "vars": {"GREETING": "hi", "LIMITS": {"max": 3}},  optional: string → text binding, other JSON → JSON binding
//     "services": [{"binding": "AUTH", "department": "acme-auth"}],         optional, same company only
//     "staticData": {"greeting": "hi"},                  optional JSON object, bound as env.STATIC_DATA
//     "dependencies": {"left-pad": "1.3.0"}              optional name → version (recorded in the SBOM)
//     "assets": {"directory": "public", …}               optional static assets, see ./assets/config.ts
//   }
//
// and optionally `edgeworker.lock.json`: {"lockfileVersion": 1, "packages": {name: {"version", "integrity"?}}}.
// Unknown keys are refused everywhere. Every refusal is one `usage` line naming the file and the key.
// Both files are parsed strictly (../../util/strict-json.ts: no duplicate keys, no invalid UTF-8,
// bounded nesting) and may be at most 64 KiB: a manifest is stored in every version row.
import {lstat, readFile, realpath, stat} from 'node:fs/promises'
import path from 'node:path'
import {z} from 'zod'
import {KitError} from '../../errors.js'
import {cronListSchema, identifierSchema, queueConsumersProblem, moduleNameSchema, moduleTypes, type ModuleType} from '../../protocol/management-api.js'
import {overLimitMessage} from '../../artifacts/size.js'
import {parseStrictJson} from '../../util/strict-json.js'
import {isKnownBuilderPolicy, unknownBuilderPolicyMessage} from '../capabilities.js'
import {assetDirectoryProblem, manifestAssetsSchema} from './assets/config.js'
import {moduleCountProblem, moduleTextProblem} from './build-rules.js'
import {isMissing, missingModuleProblem, type ProjectFile, readProjectFiles} from './project-files.js'
import {parseWithSchema} from './schema-refusals.js'
import {bindingNameProblem, manifestBindingsShape} from './manifest-bindings.js'

export const MANIFEST_FILE = 'edgeworker.json'
export const LOCK_FILE = 'edgeworker.lock.json'
/** Directories the project walk (and so the project archive) leaves out at any depth. */
/** Largest edgeworker.json or edgeworker.lock.json: part of the format, the same for every kit. */
export const MAX_PROJECT_JSON_BYTES = 64 * 1024

const jsonObject = z.record(z.string(), z.json())

/** The env binding under which a version's staticData reaches the Worker (bound when the manifest has staticData). */
export {STATIC_DATA_BINDING} from './manifest-bindings.js'

/**
 * A module's type when the manifest does not give one, by extension. Anything else needs `type`.
 * The same table applies to main, which must come out as an ES module.
 */
const TYPE_BY_EXTENSION: Readonly<Record<string, ModuleType>> = {
  '.js': 'esModule',
  '.mjs': 'esModule',
  '.cjs': 'commonJs',
  '.wasm': 'wasm',
  '.json': 'json',
  '.txt': 'text',
  '.html': 'text',
  '.htm': 'text',
  '.css': 'text',
  '.svg': 'text',
  '.md': 'text',
  '.bin': 'data',
  '.map': 'sourceMap',
}

const moduleEntrySchema = z.union([z.string(), z.strictObject({path: z.string(), type: z.enum(moduleTypes).optional(), name: z.string().optional()})], {
  error: 'must be a path or {"path", "type"?, "name"?}',
})

const manifestSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    error: 'must be 1–64 characters of letters, digits, ".", "_" or "-", starting with a letter or digit',
  }),
  main: z.string(),
  modules: z.array(moduleEntrySchema).min(1, {error: 'must list at least one module'}),
  compatibilityDate: z.string().refine(isCalendarDate, {error: 'must be a date written YYYY-MM-DD'}),
  compatibilityFlags: z
    .array(z.string().regex(/^[a-z0-9_]{1,128}$/, {error: 'must be a workerd compatibility flag (lowercase letters, digits, "_")'}))
    .max(64)
    .optional(),
  builderPolicy: z.string(),
  ...manifestBindingsShape,
  vars: z.record(identifierSchema, z.json()).optional(),
  crons: cronListSchema.optional(),
  staticData: jsonObject.optional(),
  dependencies: z
    .record(z.string().regex(/^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/, {error: 'must be a package name'}), z.string().min(1).max(256))
    .optional(),
  assets: manifestAssetsSchema.optional(),
})

const lockSchema = z.strictObject({
  lockfileVersion: z.literal(1),
  packages: z.record(z.string(), z.strictObject({version: z.string().min(1), integrity: z.string().min(1).optional()})),
})

export type WorkerManifest = z.infer<typeof manifestSchema>
export type D1DatabaseEntry = NonNullable<WorkerManifest['d1Databases']>[number]

/** The id the host keeps a database under: `id`, else `databaseName`, else the binding name. */
export function d1DatabaseIdOf(database: D1DatabaseEntry): string {
  return database.id ?? database.databaseName ?? database.binding
}
export type WorkerLock = z.infer<typeof lockSchema>
export type JsonObject = z.infer<typeof jsonObject>

export type {ProjectFile} from './project-files.js'

export interface WorkerProject {
  /** The project directory, symlinks resolved. */
  root: string
  manifest: WorkerManifest
  lock: WorkerLock | null
  /** Every regular file, sorted by path, read once: the archive and the bundle share these bytes. */
  files: ProjectFile[]
  /** The module files in module-tuple order (see moduleEntriesOf). */
  modules: ProjectFile[]
}

/** A module of a version: where it is in the project, what workerd loads it as, and the specifier it is imported by. */
export interface ModuleEntry {
  path: string
  type: ModuleType
  name: string
}

/**
 * The modules of a version in module-tuple order: main first, then the others sorted by name. Fixed
 * by the manifest alone, so listing modules in another order changes nothing downstream of the
 * manifest digest. Entries whose type the extension does not give come out with `type` undefined
 * only in manifests parseManifest refused.
 */
export function moduleEntriesOf(manifest: WorkerManifest): ModuleEntry[] {
  const entries = manifest.modules.map((entry): ModuleEntry => {
    const {path: modulePath, type, name} = typeof entry === 'string' ? {path: entry, type: undefined, name: undefined} : entry
    return {path: modulePath, type: type ?? TYPE_BY_EXTENSION[path.posix.extname(modulePath).toLowerCase()]!, name: name ?? modulePath}
  })
  // One file may be listed as several modules (names differ): main is its ES module entry.
  const esMain = entries.findIndex((entry) => entry.path === manifest.main && entry.type === 'esModule')
  const mainAt = esMain >= 0 ? esMain : entries.findIndex((entry) => entry.path === manifest.main)
  const rest = entries.filter((_, index) => index !== mainAt).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return mainAt >= 0 ? [entries[mainAt]!, ...rest] : rest
}

/** The module names (import specifiers) in module-tuple order: what the bundle carries. */
export function moduleTupleOf(manifest: WorkerManifest): string[] {
  return moduleEntriesOf(manifest).map((entry) => entry.name)
}

/** The name the main module goes by (its `name`, or its path). */
export function mainModuleNameOf(manifest: WorkerManifest): string {
  return moduleEntriesOf(manifest)[0]!.name
}

/**
 * Validates manifest data (already JSON-parsed) that claims to come from `source`: shape, builder
 * policy, module paths, types and names, duplicates, main among the modules, binding names. Does not
 * touch the file system.
 */
export function parseManifest(data: unknown, source = MANIFEST_FILE): WorkerManifest {
  const manifest = parseWithSchema(manifestSchema, data, source)
  if (!isKnownBuilderPolicy(manifest.builderPolicy)) {
    throw new KitError('usage', `${source}: key "builderPolicy": ${unknownBuilderPolicyMessage(manifest.builderPolicy)}`)
  }
  const refuse = (message: string): never => {
    throw new KitError('usage', `${source}: ${message}`)
  }
  manifest.modules.forEach((entry, index) => {
    const key = typeof entry === 'string' ? `modules[${index}]` : `modules[${index}].path`
    const modulePath = typeof entry === 'string' ? entry : entry.path
    const problem = modulePathProblem(modulePath)
    if (problem) refuse(`key "${key}": module path ${JSON.stringify(modulePath)} ${problem}`)
    const type = typeof entry === 'string' ? undefined : entry.type
    if (type === undefined && TYPE_BY_EXTENSION[path.posix.extname(modulePath).toLowerCase()] === undefined) {
      refuse(`key "${key}": the type of ${JSON.stringify(modulePath)} does not follow from its extension; give {"path", "type"}`)
    }
    const name = typeof entry === 'string' ? modulePath : (entry.name ?? modulePath)
    if (!moduleNameSchema.safeParse(name).success) {
      const nameKey = typeof entry !== 'string' && entry.name !== undefined ? `modules[${index}].name` : key
      refuse(
        `key "${nameKey}": module name ${JSON.stringify(name)} must be letters, digits, "_", "-" and "." in "/"-separated segments, none starting with "."`,
      )
    }
  })
  const tooMany = moduleCountProblem(manifest.modules.length)
  if (tooMany) refuse(`key "modules" lists ${tooMany}`)
  const entries = moduleEntriesOf(manifest)
  const duplicateName = firstDuplicate(entries.map((entry) => entry.name))
  if (duplicateName !== undefined) refuse(`key "modules" names two modules ${JSON.stringify(duplicateName)}`)
  const mainEntries = entries.filter((entry) => entry.path === manifest.main && entry.type === 'esModule')
  if (mainEntries.length > 1) refuse(`key "main": ${JSON.stringify(manifest.main)} is listed as more than one ES module; list it once as an ES module`)
  const main = entries[0]?.path === manifest.main ? entries[0] : undefined
  if (!main) refuse(`key "main" (${JSON.stringify(manifest.main)}) is not listed in "modules"`)
  if (main!.type !== 'esModule') refuse(`key "main": ${JSON.stringify(manifest.main)} is a ${main!.type} module; the main module must be an ES module`)
  // A source map maps the module it is named after (wrangler's naming): one without is a mistake.
  const scriptNames = new Set(entries.filter((entry) => entry.type === 'esModule' || entry.type === 'commonJs').map((entry) => entry.name))
  const orphanMap = entries.find((entry) => entry.type === 'sourceMap' && !scriptNames.has(entry.name.replace(/\.map$/, '')))
  if (orphanMap) refuse(`key "modules": source map ${JSON.stringify(orphanMap.name)} must be named after a JavaScript module plus ".map"`)

  const queues = queueConsumersProblem(
    (manifest.queues?.producers ?? []).map((producer) => producer.queue),
    manifest.queues?.consumers ?? [],
  )
  if (queues) refuse(`key "queues.${queues.index === null ? 'producers' : `consumers[${queues.index}]`}": ${queues.message}`)
  const nameProblem = bindingNameProblem(manifest)
  if (nameProblem) refuse(nameProblem)
  const assetsProblem = manifest.assets && assetDirectoryProblem(manifest.assets.directory)
  if (assetsProblem) refuse(`key "assets.directory": ${JSON.stringify(manifest.assets!.directory)} ${assetsProblem}`)
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

  // The assets directory is stored file by file (./assets/collect.ts), not in the archive.
  const files = await readProjectFiles(root, maxFilesBytes, manifest.assets?.directory ?? null)
  const byPath = new Map(files.map((file) => [file.path, file]))
  // The walk reads the manifest again; a manifest edited mid-build would make a self-contradicting version.
  if (!byPath.get(MANIFEST_FILE)?.bytes.equals(manifestBytes) || !sameBytes(byPath.get(LOCK_FILE)?.bytes, lockBytes)) {
    throw new KitError('usage', `${MANIFEST_FILE} or ${LOCK_FILE} changed while the project was read; try again`)
  }
  const modules: ProjectFile[] = []
  for (const entry of moduleEntriesOf(manifest)) {
    const file = byPath.get(entry.path)
    if (!file) {
      const problem = await missingModuleProblem(root, entry.path)
      throw new KitError('usage', `${MANIFEST_FILE}: module ${JSON.stringify(entry.path)} ${problem}`)
    }
    const textProblem = moduleTextProblem(entry.type, file.bytes)
    if (textProblem) throw new KitError('usage', `${MANIFEST_FILE}: module ${JSON.stringify(entry.path)} ${textProblem}`)
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
