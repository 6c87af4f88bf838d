// The `assets` key of edgeworker.json: a directory of static files the host serves for the Worker,
// as wrangler's `[assets]` table describes them (camelCase here, like the rest of the manifest):
//
//   "assets": {"directory": "public", "binding": "ASSETS", "htmlHandling": "auto-trailing-slash",
//              "notFoundHandling": "single-page-application", "runWorkerFirst": ["/api/*"]}
//
// The directory is left out of the project archive: its files are stored one by one, by content.
import {z} from 'zod'
import {HTML_HANDLING, NOT_FOUND_HANDLING, type AssetConfig} from '../../../protocol/management-api.js'

export const manifestAssetsSchema = z.strictObject({
  directory: z.string().min(1),
  binding: z
    .string()
    .regex(/^[A-Za-z_$][A-Za-z0-9_$]*$/, {error: 'must be a JavaScript identifier'})
    .optional(),
  htmlHandling: z.enum(HTML_HANDLING).optional(),
  notFoundHandling: z.enum(NOT_FOUND_HANDLING).optional(),
  runWorkerFirst: z.union([z.boolean(), z.array(z.string().regex(/^!?\//, {error: 'must be a route starting with "/" (or "!/")'})).max(100)]).optional(),
})
export type ManifestAssets = z.infer<typeof manifestAssetsSchema>

/** How the host serves them, defaults applied (Cloudflare's). */
export function assetConfigOf(assets: ManifestAssets): AssetConfig {
  return {
    htmlHandling: assets.htmlHandling ?? 'auto-trailing-slash',
    notFoundHandling: assets.notFoundHandling ?? 'none',
    runWorkerFirst: assets.runWorkerFirst ?? false,
  }
}

/** The directory as it must be written: relative, normalized, forward slashes, inside the project. */
export function assetDirectoryProblem(directory: string): string | null {
  const segments = directory.split('/')
  if (directory.startsWith('/') || /^[A-Za-z]:/.test(directory) || segments.includes('..')) return 'escapes the project directory'
  if (directory.includes('\\')) return 'must use forward slashes'
  if (segments.some((segment) => segment === '' || segment === '.')) return 'is not a normalized relative path'
  return null
}
