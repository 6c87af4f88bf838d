// Reads a version's assets directory: every regular file not ignored (./ignore.ts), hashed, under
// the limits Cloudflare sets (files per version, bytes per file — `deploy.assets_max_files` and
// `deploy.asset_max_bytes`), plus the `_headers` and `_redirects` rule files, parsed once here so a
// bad one is refused at build with its line. Bytes are not kept: submit reads each file again to
// store it, so a 20,000-file site is never held in memory at once.
import {readdir, readFile, realpath, stat} from 'node:fs/promises'
import path from 'node:path'
import {formatByteSize} from '../../../artifacts/size.js'
import {sha256Hex} from '../../../canonical-json.js'
import {KitError} from '../../../errors.js'
import {MAX_ASSET_RULES_BYTES, type AssetFile} from '../../../protocol/management-api.js'
import {STAGED_ASSETS_DIR} from './wrangler.js'
import {AssetRulesError, parseHeaders, parseRedirects} from '../../../protocol/assets/rules.js'
import type {ManifestAssets} from './config.js'
import {ALWAYS_IGNORED, ASSETS_IGNORE_FILE, parseAssetsIgnore, type IgnoreMatcher} from './ignore.js'

export interface AssetLimits {
  assets_max_files: number
  asset_max_bytes: number
}

/** What the bundle records of a version's assets: files by path (sorted) and the two rule files' text. */
export interface BundleAssets {
  files: AssetFile[]
  headers: string | null
  redirects: string | null
}

export interface CollectedAssets extends BundleAssets {
  /** Where each file is read from, by asset path. */
  sources: Map<string, string>
  totalBytes: number
}

export async function collectAssets(root: string, assets: ManifestAssets, limits: AssetLimits): Promise<CollectedAssets> {
  const stats = await stat(path.join(root, ...assets.directory.split('/'))).catch(() => null)
  if (!stats?.isDirectory()) throw new KitError('usage', `assets directory ${assets.directory} ${stats ? 'is not a directory' : 'does not exist'} (in ${root})`)
  // Real paths: a staged wrangler project links its assets directory (../assets/wrangler.ts),
  // which refusals name by where it really is, not by the link.
  const dir = await realpath(path.join(root, ...assets.directory.split('/')))
  const named = `assets directory ${assets.directory === STAGED_ASSETS_DIR ? dir : assets.directory}`
  const ignore = await readOptional(path.join(dir, ASSETS_IGNORE_FILE)).then((text) => (text === null ? () => false : parseAssetsIgnore(text)))
  const found = await walk(dir, ignore)
  if (found.length > limits.assets_max_files) {
    throw new KitError(
      'usage',
      `${named} holds ${found.length} files; at most ${limits.assets_max_files} per version (deploy.assets_max_files; .assetsignore leaves files out)`,
    )
  }
  const oversize = found.filter((file) => file.size > limits.asset_max_bytes).sort((a, b) => b.size - a.size)
  if (oversize.length > 0) {
    const largest = oversize.slice(0, 3).map((file) => `${file.relative} (${formatByteSize(file.size)})`)
    throw new KitError(
      'usage',
      `${named}: ${oversize.length} file${oversize.length === 1 ? ' is' : 's are'} over ${formatByteSize(limits.asset_max_bytes)} per file (deploy.asset_max_bytes): ${largest.join(', ')}`,
    )
  }
  const files: AssetFile[] = []
  const sources = new Map<string, string>()
  let totalBytes = 0
  for (const file of found) {
    const bytes = await readFile(file.absolute)
    const assetPath = `/${file.relative}`
    files.push({path: assetPath, sha256: sha256Hex(bytes), size: bytes.byteLength})
    sources.set(assetPath, file.absolute)
    totalBytes += bytes.byteLength
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  const headers = await readRules(dir, '_headers', parseHeaders)
  const redirects = await readRules(dir, '_redirects', parseRedirects)
  return {files, headers, redirects, sources, totalBytes}
}

interface FoundFile {
  relative: string
  absolute: string
  size: number
}

async function walk(dir: string, ignore: IgnoreMatcher): Promise<FoundFile[]> {
  const found: FoundFile[] = []
  const visit = async (relativeDir: string) => {
    for (const entry of await readdir(path.join(dir, relativeDir), {withFileTypes: true})) {
      const relative = relativeDir === '' ? entry.name : `${relativeDir}/${entry.name}`
      if (entry.isDirectory()) {
        if (!ignore(relative, true)) await visit(relative)
      } else if (entry.isFile()) {
        if (relativeDir === '' && ALWAYS_IGNORED.has(entry.name)) continue
        if (ignore(relative, false)) continue
        const absolute = path.join(dir, relative)
        found.push({relative, absolute, size: (await stat(absolute)).size})
      }
    }
  }
  await visit('')
  return found
}

async function readRules(dir: string, name: string, parse: (text: string) => unknown): Promise<string | null> {
  const text = await readOptional(path.join(dir, name))
  if (text === null) return null
  if (Buffer.byteLength(text) > MAX_ASSET_RULES_BYTES) throw new KitError('usage', `${name} is over ${formatByteSize(MAX_ASSET_RULES_BYTES)}`)
  try {
    parse(text)
  } catch (error) {
    if (error instanceof AssetRulesError) throw new KitError('usage', error.message)
    throw error
  }
  return text
}

async function readOptional(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
}
