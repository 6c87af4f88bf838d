// Turns a wrangler project into an edgeworker.json project in a staging directory, which the
// ordinary build then reads: TypeScript, JSX and npm dependencies bundled with esbuild (the bundler
// wrangler uses), module rules for text/data/wasm, `node:*` left to workerd under nodejs_compat,
// a source map kept in the project archive (and, with upload_source_maps, uploaded with the
// version as a `sourceMap` module the host maps stacks with), and the SBOM taken from package-lock.json for exactly
// the packages that end up in the bundle. The same inputs give byte-identical output.
import {existsSync, readFileSync, realpathSync} from 'node:fs'
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {builtinModules} from 'node:module'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {build, type BuildOptions, type Message, type Metafile} from 'esbuild'
import {overLimitMessage} from '../../../artifacts/size.js'
import {KitError} from '../../../errors.js'
import {KNOWN_POLICY_MINORS} from '../../capabilities.js'
import {ASSETS_ONLY_MAIN, stageAssets} from '../assets/wrangler.js'
import {moduleCountProblem, moduleTextProblem, outsideProjectProblem} from '../build-rules.js'
import {LOCK_FILE, MANIFEST_FILE} from '../manifest.js'
import {checkBundleInputs, isFileInput} from './bundle-inputs.js'
import {loadWranglerConfig, type WranglerSettings} from './config.js'
import {additionalModules, DEFAULT_RULES, type ModuleRule, moduleRulesPlugin, ruleTypeOf, type StagedModule, toPosix, type TypeOf} from './module-rules.js'
import {nodeCompatBuildOptions, nodeCompatModeOf, polyfillPackagesOf} from './node-compat.js'

export const DEFAULT_BUILDER_POLICY = `department-worker-project-v2.${KNOWN_POLICY_MINORS.highest}`
/** Where the staged project keeps the bundle's source map: in the archive, not uploaded as a module. */
export const SOURCE_MAP_DIR = 'sourcemap'

/**
 * How a Worker is bundled, with wrangler's (4.86) esbuild options: one in-memory ES module for
 * workerd; esbuild's default (browser) platform, so package.json `browser` fields and the
 * browser/module/main fields apply; `.js` may hold JSX; `process.env.NODE_ENV` is "production".
 */
export const WORKER_BUNDLE_OPTIONS = {
  bundle: true,
  write: false,
  format: 'esm',
  target: 'es2024',
  supported: {'import-source': true},
  loader: {'.js': 'jsx', '.mjs': 'jsx', '.cjs': 'jsx'},
  conditions: ['workerd', 'worker', 'browser'],
} as const satisfies BuildOptions
/** wrangler deploy's defines, under the project's own `define`. */
const NODE_ENV_DEFINES = {
  'process.env.NODE_ENV': '"production"',
  'global.process.env.NODE_ENV': '"production"',
  'globalThis.process.env.NODE_ENV': '"production"',
}

export interface WranglerStageOptions {
  env?: string | null
  /** The entry module (absolute), instead of the config's main. */
  main?: string
  /** Deploy the modules as they are (wrangler's no_bundle); default from the config. */
  noBundle?: boolean
  builderPolicy?: string
  bundleMaxBytes: number
}

export interface StagedProject {
  /** An edgeworker.json project the ordinary build reads. */
  dir: string
  configFile: string
  env: string | null
  bundled: boolean
  /** The department the config's [edgeworkers] table names, if any (an env's own, with env). */
  department: string | null
  /** The department the top level's [edgeworkers] table names: the production Worker's. */
  productionDepartment: string | null
  warnings: string[]
  cleanup(): Promise<void>
}

export async function stageWranglerProject(project: string, configFile: string, options: WranglerStageOptions): Promise<StagedProject> {
  const {config, warnings, env, productionDepartment} = loadWranglerConfig(configFile, options.env ?? null)
  // Real path: esbuild reports its inputs with symlinks resolved, and containment compares real paths.
  const projectDir = realpathSync(project)
  const source = path.basename(configFile)
  const required = (key: 'name' | 'main' | 'compatibility_date'): string => {
    const value = config[key]
    if (!value)
      throw new KitError('usage', `${source}: key "${key}" is required${key === 'main' ? ' (or give the entry module: deploy <entry> or --main)' : ''}`)
    return value
  }
  // wrangler's rule: paths in the config are relative to the config file; --main to the current directory.
  const configDir = path.dirname(realpathSync(configFile))
  // An assets-only site has no main: it gets the Worker ASSETS_ONLY_MAIN.
  const assetsOnly = options.main === undefined && config.main === undefined && config.assets !== undefined
  let main = projectDir
  if (!assetsOnly) {
    const givenMain = options.main ?? path.resolve(configDir, required('main'))
    const mainProblem = outsideProjectProblem(projectDir, givenMain)
    if (mainProblem)
      throw new KitError('usage', `${options.main === undefined ? `${source}: main ${required('main')}` : `--main ${options.main}`} ${mainProblem}`)
    main = realpathSync(givenMain)
  }
  const baseDir = config.base_dir === undefined ? (assetsOnly ? projectDir : path.dirname(main)) : path.resolve(configDir, config.base_dir)
  if (baseDir !== projectDir && outsideProjectProblem(projectDir, baseDir)) {
    throw new KitError('usage', `${source}: base_dir ${config.base_dir} ${outsideProjectProblem(projectDir, baseDir)}`)
  }
  const rules = [...(config.rules ?? []), ...DEFAULT_RULES]
  const typeOf = ruleTypeOf(rules)
  const noBundle = options.noBundle ?? config.no_bundle ?? false
  const refuse = (message: string): never => {
    throw new KitError('usage', `${source}: ${message}`)
  }
  // wrangler: with no_bundle the other modules under base_dir are always found.
  const additional = !assetsOnly && (noBundle || config.find_additional_modules) ? await additionalModules(baseDir, main, typeOf, refuse) : []

  const {modules, packages} = assetsOnly
    ? {modules: [ASSETS_ONLY_MAIN], packages: new Map()}
    : noBundle
      ? await unbundledModules(main, baseDir, typeOf, additional, refuse)
      : await bundledModules(projectDir, main, baseDir, rules, additional, config, options.bundleMaxBytes)

  const tooMany = moduleCountProblem(modules.filter((module) => module.type !== 'sourceMap' || config.upload_source_maps).length)
  if (tooMany) throw new KitError('usage', `${source}: the build gives ${tooMany}`)
  const [mainModule] = modules
  const manifest = {
    name: required('name'),
    main: mainModule!.name,
    modules: modules.flatMap((module): Array<string | {path: string; type: string; name?: string}> => {
      if (module.type === 'esModule') return [module.name]
      if (module.type !== 'sourceMap') return [{path: module.name, type: module.type}]
      // Uploaded beside the module it maps, named as wrangler names it; else only in the archive.
      return config.upload_source_maps ? [{path: module.name, type: module.type, name: module.name.slice(SOURCE_MAP_DIR.length + 1)}] : []
    }),
    compatibilityDate: required('compatibility_date'),
    builderPolicy: options.builderPolicy ?? config.edgeworkers?.builder_policy ?? DEFAULT_BUILDER_POLICY,
    ...(config.compatibility_flags?.length ? {compatibilityFlags: config.compatibility_flags} : {}),
    ...(config.vars && Object.keys(config.vars).length > 0 ? {vars: config.vars} : {}),
    ...(config.durable_objects?.bindings.length
      ? {durableObjects: config.durable_objects.bindings.map((binding) => ({binding: binding.name, className: binding.class_name}))}
      : {}),
    ...(config.triggers?.crons?.length ? {crons: config.triggers.crons} : {}),
    ...(config.kv_namespaces?.length
      ? {kvNamespaces: config.kv_namespaces.map((namespace) => ({binding: namespace.binding, id: namespace.id ?? namespace.binding}))}
      : {}),
    ...(config.d1_databases?.length
      ? {
          d1Databases: config.d1_databases.map((database) => ({
            binding: database.binding,
            ...(database.database_name === undefined ? {} : {databaseName: database.database_name}),
            ...(database.database_id === undefined ? {} : {id: database.database_id}),
            ...(database.migrations_dir === undefined ? {} : {migrationsDir: database.migrations_dir}),
            ...(database.migrations_table === undefined ? {} : {migrationsTable: database.migrations_table}),
          })),
        }
      : {}),
    ...(config.r2_buckets?.length
      ? {
          r2Buckets: config.r2_buckets.map((bucket) => ({
            binding: bucket.binding,
            bucketName: bucket.bucket_name ?? bucket.binding.toLowerCase().replaceAll('_', '-'),
          })),
        }
      : {}),
    ...(config.queues?.producers?.length || config.queues?.consumers?.length ? {queues: queuesOf(config.queues)} : {}),
    // On-prem a service is a department of the same company: `service` names the department.
    ...(config.services?.length
      ? {
          services: config.services.map((service) => ({
            binding: service.binding,
            department: service.service,
            ...(service.entrypoint ? {entrypoint: service.entrypoint} : {}),
          })),
        }
      : {}),
    ...(packages.size > 0 ? {dependencies: Object.fromEntries([...packages].map(([name, entry]) => [name, entry.version]))} : {}),
  }

  const dir = await mkdtemp(path.join(tmpdir(), 'edgeworkers-stage-'))
  try {
    for (const module of modules) {
      await mkdir(path.dirname(path.join(dir, module.name)), {recursive: true, mode: 0o700})
      await writeFile(path.join(dir, module.name), module.bytes, {mode: 0o600})
    }
    const assets = config.assets && {assets: await stageAssets(projectDir, config.assets, dir, source)}
    await writeFile(path.join(dir, MANIFEST_FILE), `${JSON.stringify({...manifest, ...assets}, null, 2)}\n`, {mode: 0o600})
    if (packages.size > 0) {
      const lock = {
        lockfileVersion: 1,
        packages: Object.fromEntries(
          [...packages].map(([name, entry]) => [name, entry.integrity ? {version: entry.version, integrity: entry.integrity} : {version: entry.version}]),
        ),
      }
      await writeFile(path.join(dir, LOCK_FILE), `${JSON.stringify(lock, null, 2)}\n`, {mode: 0o600})
    }
  } catch (error) {
    await rm(dir, {recursive: true, force: true})
    throw error
  }
  return {
    dir,
    configFile,
    env,
    bundled: !noBundle,
    department: config.edgeworkers?.department ?? null,
    productionDepartment,
    warnings,
    cleanup: () => rm(dir, {recursive: true, force: true}),
  }
}

type Packages = Map<string, {version: string; integrity?: string}>

async function bundledModules(
  projectDir: string,
  main: string,
  baseDir: string,
  rules: ModuleRule[],
  additional: StagedModule[],
  config: WranglerSettings,
  bundleMaxBytes: number,
): Promise<{modules: StagedModule[]; packages: Packages}> {
  const mainName = toPosix(path.relative(baseDir, main)).replace(/\.(m?[jt]sx?|cts|cjs)$/, '.js')
  const attached = new Map<string, StagedModule>()
  const rulesPlugin = moduleRulesPlugin({
    projectDir,
    rules,
    mainName,
    additional: new Set(additional.map((module) => path.join(baseDir, module.name))),
    preserveFileNames: config.preserve_file_names ?? false,
    attached,
  })
  const flags = config.compatibility_flags ?? []
  const nodeCompatMode = nodeCompatModeOf(config.compatibility_date ?? '', flags)
  const nodeCompat = await nodeCompatBuildOptions(nodeCompatMode, config.compatibility_date ?? '', flags)
  const result = await build({
    absWorkingDir: projectDir,
    entryPoints: [main],
    outfile: path.join(baseDir, mainName),
    ...WORKER_BUNDLE_OPTIONS,
    // workerd's own modules always come from the runtime; Node.js built-ins as ./node-compat.ts says.
    external: ['cloudflare:*', ...nodeCompat.external],
    define: {...NODE_ENV_DEFINES, ...config.define},
    alias: config.alias,
    tsconfig: config.tsconfig,
    jsxFactory: config.jsx_factory,
    jsxFragment: config.jsx_fragment,
    minify: config.minify ?? false,
    sourcemap: 'external',
    metafile: true,
    logLevel: 'silent',
    plugins: [rulesPlugin, ...nodeCompat.plugins],
  }).catch((error: {errors?: Message[]}) => {
    const builtinsRefused = nodeCompatMode === null || nodeCompatMode === 'als'
    throw new KitError('usage', `bundling failed: ${describeBuildError(error.errors?.[0], !builtinsRefused) ?? String(error)}`)
  })
  await checkBundleInputs(projectDir, result.metafile)
  const code = result.outputFiles.find((file) => file.path.endsWith('.js'))!
  const map = result.outputFiles.find((file) => file.path.endsWith('.map'))!
  const separate = [...additional, ...attached.values()]
  const uncompressed = code.contents.byteLength + separate.reduce((sum, module) => sum + module.bytes.byteLength, 0)
  if (uncompressed > bundleMaxBytes) {
    throw new KitError('usage', `${overLimitMessage('bundle', uncompressed, bundleMaxBytes)}; largest inputs: ${largestInputs(result.metafile, separate)}`)
  }
  const others = [...additional.map(({name, type, bytes}) => ({name, type, bytes})), ...attached.values()]
  const modules: StagedModule[] = [
    {name: mainName, type: 'esModule', bytes: code.contents},
    ...others.sort((a, b) => a.name.localeCompare(b.name)),
    {name: `${SOURCE_MAP_DIR}/${mainName}.map`, type: 'sourceMap', bytes: map.contents},
  ]
  return {modules, packages: bundledPackages(projectDir, result.metafile)}
}

async function unbundledModules(
  main: string,
  baseDir: string,
  typeOf: TypeOf,
  additional: StagedModule[],
  refuse: (message: string) => never,
): Promise<{modules: StagedModule[]; packages: Packages}> {
  const relative = toPosix(path.relative(baseDir, main))
  // wrangler reads a .js or .mjs main as an ES module unless a rule of the project's says otherwise.
  const type = typeOf(relative) ?? (/\.m?js$/.test(relative) ? 'ESModule' : undefined)
  if (!type) refuse(`${relative} matches no module rule; with no_bundle, write the Worker in JavaScript or add a rule`)
  if (type !== 'ESModule') refuse('main must be an ES module')
  const bytes = await readFile(main)
  const textProblem = moduleTextProblem('esModule', bytes)
  if (textProblem) refuse(`${relative} ${textProblem}`)
  const others = additional.map(({name, type: moduleType, bytes: moduleBytes}) => ({name, type: moduleType, bytes: moduleBytes}))
  return {modules: [{name: relative, type: 'esModule', bytes}, ...others], packages: new Map()}
}

/**
 * The npm packages whose files esbuild put in the bundle, with version and integrity from the
 * nearest package-lock.json (the project's, or its workspace root's).
 */
function bundledPackages(projectDir: string, metafile: Metafile): Packages {
  const lockDir = nearestDirWith(projectDir, 'package-lock.json')
  const lock = lockDir
    ? (JSON.parse(readFileSync(path.join(lockDir, 'package-lock.json'), 'utf8')) as {packages?: Record<string, {version?: string; integrity?: string}>})
    : {}
  const packages: Packages = new Map()
  for (const input of Object.keys(metafile.inputs).filter(isFileInput)) {
    const match = /^(.*?node_modules\/((?:@[^/]+\/)?[^/]+))\//.exec(input)
    if (!match || packages.has(match[2]!)) continue
    const [, installPath, name] = match as unknown as [string, string, string]
    const installDir = path.resolve(projectDir, installPath)
    const locked = lockDir ? lock.packages?.[toPosix(path.relative(lockDir, installDir))] : undefined
    const version = locked?.version ?? (JSON.parse(readFileSync(path.join(installDir, 'package.json'), 'utf8')) as {version: string}).version
    packages.set(name, locked?.integrity ? {version, integrity: locked.integrity} : {version})
  }
  for (const [name, version] of polyfillPackagesOf(metafile)) packages.set(name, {version})
  return new Map([...packages].sort(([a], [b]) => a.localeCompare(b)))
}

function nearestDirWith(start: string, file: string): string | null {
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, file))) return dir
    if (path.dirname(dir) === dir) return null
  }
}

function largestInputs(metafile: Metafile, separate: StagedModule[]): string {
  const output = Object.values(metafile.outputs).find((entry) => entry.entryPoint !== undefined)
  const sizes = [
    ...Object.entries(output?.inputs ?? {}).map(([name, entry]) => [name, entry.bytesInOutput] as const),
    ...separate.map((module) => [module.name, module.bytes.byteLength] as const),
  ]
  return sizes
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([name, bytes]) => `${name} (${bytes} bytes)`)
    .join(', ')
}

function describeBuildError(message: Message | undefined, nodeCompat: boolean): string | undefined {
  if (!message) return undefined
  const where = message.location ? `${message.location.file}:${message.location.line}:${message.location.column + 1}: ` : ''
  const builtin = /Could not resolve "(node:[^"]+|[a-z_]+)"/.exec(message.text)
  if (builtin && !nodeCompat && (builtin[1]!.startsWith('node:') || builtinModules.includes(builtin[1]!))) {
    return `${where}${message.text} (Node.js built-ins need compatibility_flags = ["nodejs_compat"])`
  }
  return `${where}${message.text}`
}

/** wrangler's queues table in edgeworker.json's words; a setting left out keeps Cloudflare's default. */
function queuesOf(queues: NonNullable<WranglerSettings['queues']>): object {
  const defined = (entries: Record<string, unknown>) => Object.fromEntries(Object.entries(entries).filter(([, value]) => value !== undefined && value !== null))
  return {
    ...(queues.producers?.length
      ? {producers: queues.producers.map((producer) => defined({binding: producer.binding, queue: producer.queue, deliveryDelay: producer.delivery_delay}))}
      : {}),
    ...(queues.consumers?.length
      ? {
          consumers: queues.consumers.map((consumer) =>
            defined({
              queue: consumer.queue,
              maxBatchSize: consumer.max_batch_size,
              maxBatchTimeout: consumer.max_batch_timeout,
              maxRetries: consumer.max_retries,
              retryDelay: consumer.retry_delay,
              deadLetterQueue: consumer.dead_letter_queue,
              maxConcurrency: consumer.max_concurrency,
            }),
          ),
        }
      : {}),
  }
}
