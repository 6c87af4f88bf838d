// Static assets on the wire: how a release's assets are served (the config wrangler's `[assets]`
// names), the files it serves (path → content SHA-256), and the two rule files Cloudflare reads from
// the assets directory, `_headers` and `_redirects` (their text; ../assets/rules.ts parses them on
// both sides). Asset bytes travel separately, content-addressed: the kit asks which the host lacks.
import {z} from 'zod'
import type {Endpoint} from '../endpoint.js'
import {hex64} from './common.js'

export const HTML_HANDLING = ['auto-trailing-slash', 'force-trailing-slash', 'drop-trailing-slash', 'none'] as const
export const NOT_FOUND_HANDLING = ['none', '404-page', 'single-page-application'] as const
export type HtmlHandling = (typeof HTML_HANDLING)[number]
export type NotFoundHandling = (typeof NOT_FOUND_HANDLING)[number]

/** `runWorkerFirst`: true, false, or route globs (`/api/*`; `!/api/docs/*` excludes). */
export const assetConfigSchema = z.strictObject({
  htmlHandling: z.enum(HTML_HANDLING).default('auto-trailing-slash'),
  notFoundHandling: z.enum(NOT_FOUND_HANDLING).default('none'),
  runWorkerFirst: z.union([z.boolean(), z.array(z.string().min(1).max(256).startsWith('/').or(z.string().startsWith('!/'))).max(100)]).default(false),
})
export type AssetConfig = z.output<typeof assetConfigSchema>

/** An asset path: `/` then segments, no `.`/`..` segments, no empty segment. */
export const assetPathSchema = z
  .string()
  .max(1024)
  .regex(/^(\/[^/]+)+$/, {error: 'must be an absolute path of non-empty segments'})
  .refine((value) => !value.split('/').some((segment) => segment === '.' || segment === '..'), {error: 'must not contain "." or ".." segments'})

export const assetFileSchema = z.strictObject({path: assetPathSchema, sha256: hex64, size: z.number().int().min(0)})
export type AssetFile = z.infer<typeof assetFileSchema>

/** Largest `_headers` or `_redirects` text; Cloudflare's rule and line limits apply within it. */
export const MAX_ASSET_RULES_BYTES = 256 * 1024

export const releaseAssetsSchema = z.strictObject({
  config: assetConfigSchema,
  /** Sorted by path, each path once. */
  files: z.array(assetFileSchema).max(100_000),
  headers: z.string().max(MAX_ASSET_RULES_BYTES).nullable(),
  redirects: z.string().max(MAX_ASSET_RULES_BYTES).nullable(),
})
export type ReleaseAssets = z.output<typeof releaseAssetsSchema>

export const missingAssetsRequestSchema = z.strictObject({hashes: z.array(hex64).max(100_000)})
export const missingAssetsSchema = z.strictObject({missing: z.array(hex64)})
export type MissingAssets = z.infer<typeof missingAssetsSchema>

/** Asset bytes, a batch at a time; the host checks each against its hash. */
export const putAssetsSchema = z.strictObject({
  files: z
    .array(z.strictObject({sha256: hex64, contentBase64: z.base64({error: 'must be base64'})}))
    .min(1)
    .max(1_000),
})
/** The asset files the host stores that no release of its names: removed once past host.asset_unreferenced_grace_seconds. */
export const unreferencedAssetsSchema = z.strictObject({unreferenced: z.array(hex64)})
export const putAssetsResultSchema = z.strictObject({stored: z.number().int()})

const signed = true

/** The asset rows of the endpoint table (../endpoints.ts). */
export const assetEndpoints = {
  missingAssets: {
    method: 'POST',
    path: '/v1/assets/missing',
    signed,
    request: missingAssetsRequestSchema,
    response: missingAssetsSchema,
    answer: 'json',
    summary: 'Which of these asset SHA-256s the host does not hold: the kit sends only those before an upload.',
  },
  putAssets: {
    method: 'POST',
    path: '/v1/assets',
    signed,
    request: putAssetsSchema,
    response: putAssetsResultSchema,
    answer: 'json',
    summary: 'Stores asset files by content (each checked against its SHA-256); an upload may then name them.',
  },
  unreferencedAssets: {
    method: 'GET',
    path: '/v1/assets/unreferenced',
    signed,
    response: unreferencedAssetsSchema,
    answer: 'json',
    summary: 'The SHA-256s of the asset files the host stores that no release names (the orphan report), sorted.',
  },
} as const satisfies Record<string, Endpoint>
