// A wrangler project's `[assets]`, staged: the directory (relative to the config file, as wrangler
// reads it) linked into the staged project — the build reads it through the link, and the files'
// real paths outlive the staging directory, since submit stores them after it is gone — and the
// manifest's `assets` key. A project with assets
// and no `main` is an assets-only site: it gets a Worker that answers what no asset matches with an
// empty 404, as Cloudflare answers it.
import {stat, symlink} from 'node:fs/promises'
import path from 'node:path'
import {KitError} from '../../../errors.js'
import type {WranglerSettings} from '../wrangler/config.js'
import type {ManifestAssets} from './config.js'

/** Where the staged project keeps the assets: no module name can start with ".". */
export const STAGED_ASSETS_DIR = '.assets'

export const ASSETS_ONLY_MAIN = {
  name: 'assets-only.js',
  type: 'esModule',
  bytes: new TextEncoder().encode('export default {fetch() {return new Response(null, {status: 404})}}\n'),
}

export async function stageAssets(
  projectDir: string,
  assets: NonNullable<WranglerSettings['assets']>,
  stagedDir: string,
  source: string,
): Promise<ManifestAssets> {
  const from = path.resolve(projectDir, assets.directory)
  const stats = await stat(from).catch(() => null)
  if (!stats?.isDirectory()) throw new KitError('usage', `${source}: assets.directory ${assets.directory} ${stats ? 'is not a directory' : 'does not exist'}`)
  await symlink(from, path.join(stagedDir, STAGED_ASSETS_DIR), 'dir')
  return {
    directory: STAGED_ASSETS_DIR,
    ...(assets.binding === undefined ? {} : {binding: assets.binding}),
    ...(assets.html_handling === undefined ? {} : {htmlHandling: assets.html_handling}),
    ...(assets.not_found_handling === undefined ? {} : {notFoundHandling: assets.not_found_handling}),
    ...(assets.run_worker_first === undefined ? {} : {runWorkerFirst: assets.run_worker_first}),
  }
}
