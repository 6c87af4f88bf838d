// Which kind of project a directory is: an edgeworker.json project (read as it is), or a wrangler
// project (wrangler.toml / .json / .jsonc), staged into an edgeworker.json project first. When a
// directory has both, edgeworker.json wins, and the build says so.
import {existsSync, statSync} from 'node:fs'
import path from 'node:path'
import {KitError} from '../../errors.js'
import {MANIFEST_FILE} from './manifest.js'
import {findWranglerConfig} from './wrangler/config.js'
import {stageWranglerProject} from './wrangler/stage.js'

export interface ProjectSourceOptions {
  /** A wrangler `[env.<name>]` section to apply. */
  env?: string | null
  /** wrangler's no_bundle, from the command line. */
  noBundle?: boolean
  /** For wrangler projects: the builder policy (else the config's [edgeworkers] table, else the newest). */
  builderPolicy?: string
}

export interface ProjectSource {
  /** The file the project was read from: edgeworker.json, or the wrangler config. */
  file: string
  kind: 'edgeworker' | 'wrangler'
  env: string | null
  /** esbuild bundled the Worker (wrangler projects without no_bundle). */
  bundled: boolean
  /** The department the wrangler config's [edgeworkers] table names. */
  department: string | null
  /** One-line notes for the operator: keys ignored, which manifest won. */
  warnings: string[]
}

/** Runs `use` on an edgeworker.json project directory for `projectDir`, staging a wrangler project first. */
export async function withProjectSource<T>(
  projectDir: string,
  options: ProjectSourceOptions & {bundleMaxBytes: number},
  use: (dir: string, source: ProjectSource) => Promise<T>,
): Promise<T> {
  const root = path.resolve(projectDir)
  if (!existsSync(root)) throw new KitError('usage', `project directory ${root} does not exist`)
  if (!statSync(root).isDirectory()) throw new KitError('usage', `project directory ${root} is not a directory`)
  const wrangler = findWranglerConfig(root)
  if (existsSync(path.join(root, MANIFEST_FILE))) {
    const wranglerOnly = [options.env ? '--env' : null, options.noBundle ? '--no-bundle' : null, options.builderPolicy ? '--builder-policy' : null].filter(
      Boolean,
    )
    if (wranglerOnly.length > 0) throw new KitError('usage', `${wranglerOnly.join(', ')} apply to wrangler projects; ${root} is read from its ${MANIFEST_FILE}`)
    const warnings = wrangler ? [`${MANIFEST_FILE} wins over ${path.basename(wrangler)} in ${root}`] : []
    return use(root, {file: path.join(root, MANIFEST_FILE), kind: 'edgeworker', env: null, bundled: false, department: null, warnings})
  }
  if (!wrangler)
    throw new KitError('usage', `no ${MANIFEST_FILE}, wrangler.toml, wrangler.jsonc or wrangler.json in ${root} (edgeworkers init writes a project)`)
  const staged = await stageWranglerProject(root, wrangler, {...options, bundleMaxBytes: options.bundleMaxBytes})
  try {
    return await use(staged.dir, {
      file: wrangler,
      kind: 'wrangler',
      env: staged.env,
      bundled: staged.bundled,
      department: staged.department,
      warnings: staged.warnings,
    })
  } finally {
    await staged.cleanup()
  }
}
