// Which kind of project a directory is: an edgeworker.json project (read as it is), or a wrangler
// project (wrangler.toml / .json / .jsonc), staged into an edgeworker.json project first. When a
// directory has both, edgeworker.json wins, and the build says so. As with wrangler, the entry can
// be given instead of the directory (`deploy src/index.ts`: wrangler's [script], the project being
// the nearest directory above it with a wrangler config) or beside it (--main), and the config by
// file (--wrangler-config: wrangler's -c, any file name); both paths are relative to the current directory.
import {existsSync, statSync} from 'node:fs'
import path from 'node:path'
import {KitError} from '../../errors.js'
import {MANIFEST_FILE} from './manifest.js'
import {findWranglerConfig} from './wrangler/config.js'
import {inWranglerTerms} from './wrangler/manifest-keys.js'
import {stageWranglerProject} from './wrangler/stage.js'

export interface ProjectSourceOptions {
  /** A wrangler `[env.<name>]` section to apply. */
  env?: string | null
  /** wrangler's no_bundle, from the command line. */
  noBundle?: boolean
  /** For wrangler projects: the builder policy (else the config's [edgeworkers] table, else the newest). */
  builderPolicy?: string
  /** wrangler's [script]: the entry module, instead of the config's main. */
  main?: string
  /** wrangler's -c: the config file, instead of the directory's wrangler.toml / .jsonc / .json. */
  config?: string
}

export interface ProjectSource {
  /** The file the project was read from: edgeworker.json, or the wrangler config. */
  file: string
  kind: 'edgeworker' | 'wrangler'
  env: string | null
  /** esbuild bundled the Worker (wrangler projects without no_bundle). */
  bundled: boolean
  /** The department the wrangler config's [edgeworkers] table names (with an env, the env's: default <department>-<env>). */
  department: string | null
  /** The department the top level's [edgeworkers] table names: the production Worker's, which an env must not replace unasked. */
  productionDepartment: string | null
  /** One-line notes for the operator: keys ignored, which manifest won. */
  warnings: string[]
}

/** Runs `use` on an edgeworker.json project directory for `projectDir`, staging a wrangler project first. */
export async function withProjectSource<T>(
  projectDir: string,
  options: ProjectSourceOptions & {bundleMaxBytes: number},
  use: (dir: string, source: ProjectSource) => Promise<T>,
): Promise<T> {
  const given = path.resolve(projectDir)
  if (!existsSync(given)) throw new KitError('usage', `project directory ${given} does not exist`)
  // A file is the entry module (wrangler's [script]); its project is the nearest directory above with a config.
  const isDirectory = statSync(given).isDirectory()
  if (!isDirectory && options.main !== undefined) throw new KitError('usage', `give the entry module once: ${projectDir} or --main ${options.main}`)
  const entry = isDirectory ? options.main : projectDir
  const root = isDirectory ? given : entryProjectDir(given, options)
  const wrangler = options.config === undefined ? findWranglerConfig(root) : path.resolve(options.config)
  if (options.config !== undefined && !existsSync(wrangler!)) throw new KitError('usage', `--wrangler-config ${options.config} does not exist`)
  if (existsSync(path.join(root, MANIFEST_FILE)) && options.config === undefined) {
    const wranglerOnly = [
      options.env ? '--env' : null,
      options.noBundle ? '--no-bundle' : null,
      options.builderPolicy ? '--builder-policy' : null,
      entry !== undefined ? '--main' : null,
    ].filter(Boolean)
    if (wranglerOnly.length > 0) throw new KitError('usage', `${wranglerOnly.join(', ')} apply to wrangler projects; ${root} is read from its ${MANIFEST_FILE}`)
    const warnings = wrangler ? [`${MANIFEST_FILE} wins over ${path.basename(wrangler)} in ${root}`] : []
    return use(root, {
      file: path.join(root, MANIFEST_FILE),
      kind: 'edgeworker',
      env: null,
      bundled: false,
      department: null,
      productionDepartment: null,
      warnings,
    })
  }
  if (!wrangler)
    throw new KitError('usage', `no ${MANIFEST_FILE}, wrangler.toml, wrangler.jsonc or wrangler.json in ${root} (edgeworkers init writes a project)`)
  const staged = await stageWranglerProject(root, wrangler, {
    ...options,
    main: entry === undefined ? undefined : path.resolve(entry),
    bundleMaxBytes: options.bundleMaxBytes,
  })
  try {
    return await use(staged.dir, {
      file: wrangler,
      kind: 'wrangler',
      env: staged.env,
      bundled: staged.bundled,
      department: staged.department,
      productionDepartment: staged.productionDepartment,
      warnings: staged.warnings,
    })
  } catch (error) {
    throw inWranglerTerms(error, path.basename(wrangler), staged.env)
  } finally {
    await staged.cleanup()
  }
}

/** The project of an entry module given as the path: the nearest directory above it holding a wrangler config (or the --wrangler-config file's). */
function entryProjectDir(entry: string, options: ProjectSourceOptions): string {
  if (options.config !== undefined) return path.dirname(path.resolve(options.config))
  for (let dir = path.dirname(entry); ; dir = path.dirname(dir)) {
    if (findWranglerConfig(dir)) return dir
    if (path.dirname(dir) === dir) throw new KitError('usage', `no wrangler.toml, wrangler.jsonc or wrangler.json beside ${entry} or above it`)
  }
}
