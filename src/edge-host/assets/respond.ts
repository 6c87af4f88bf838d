// Writing an asset response: content-type by extension, a strong ETag from the content's SHA-256
// (weak for a compressed variant), If-None-Match → 304, one `Range` → 206 (or 416), HEAD without a
// body, and brotli or gzip when the client accepts it and the type compresses — each variant
// compressed once and kept in a bounded cache.
import type http from 'node:http'
import {promisify} from 'node:util'
import {brotliCompress, constants as zlibConstants, gzip} from 'node:zlib'
import {contentTypeOf, isCompressible} from './content-type.js'

const brotli = promisify(brotliCompress)
const gzipAsync = promisify(gzip)
/** Smaller files are sent as they are: the encoding would save less than its overhead. */
const COMPRESS_MIN_BYTES = 1024
const COMPRESSED_CACHE_BYTES = 64 * 1024 * 1024

export interface AssetBody {
  path: string
  sha256: string
  bytes: Buffer
  status: 200 | 404
}

type Encoding = 'br' | 'gzip'

const compressed = new Map<string, Buffer>()
let compressedBytes = 0

/** What the `_headers` rules do to a response (protocol/assets/rules.ts headersFor). */
export interface HeaderChanges {
  set: ReadonlyMap<string, string>
  unset: ReadonlySet<string>
}

/** Applies `_headers` changes; wrangler's asset worker applies them to every response it makes, redirects too. */
export function applyHeaderChanges(response: http.ServerResponse, changes: HeaderChanges): void {
  for (const name of changes.unset) response.removeHeader(name)
  for (const [name, value] of changes.set) response.setHeader(name, value)
}

export async function writeAsset(request: http.IncomingMessage, response: http.ServerResponse, asset: AssetBody, changes: HeaderChanges): Promise<void> {
  const type = contentTypeOf(asset.path)
  const etag = `"${asset.sha256.slice(0, 32)}"`
  const range = asset.status === 200 ? request.headers.range : undefined
  const encoding = range === undefined && isCompressible(type) && asset.bytes.length >= COMPRESS_MIN_BYTES ? acceptedEncoding(request) : null
  const variantTag = encoding === null ? etag : `W/"${asset.sha256.slice(0, 32)}-${encoding}"`
  if (type !== undefined) response.setHeader('content-type', type)
  response.setHeader('etag', variantTag)
  // As the asset worker: a response to a request with credentials or a range is not for shared caches' reuse.
  if (request.headers.authorization === undefined && range === undefined) response.setHeader('cache-control', 'public, max-age=0, must-revalidate')
  if (isCompressible(type)) response.setHeader('vary', 'Accept-Encoding')
  applyHeaderChanges(response, changes)
  const head = request.method === 'HEAD'

  if (asset.status === 200 && matchesIfNoneMatch(request.headers['if-none-match'], asset.sha256)) {
    response.writeHead(304).end()
    return
  }
  if (range !== undefined) {
    const span = parseRange(range, asset.bytes.length)
    if (span === 'unsatisfiable') {
      response.writeHead(416, {'content-range': `bytes */${asset.bytes.length}`}).end()
      return
    }
    if (span !== null) {
      const [start, end] = span
      response.writeHead(206, {'content-range': `bytes ${start}-${end}/${asset.bytes.length}`, 'content-length': end - start + 1, 'accept-ranges': 'bytes'})
      response.end(head ? undefined : asset.bytes.subarray(start, end + 1))
      return
    }
  }
  const body = encoding === null ? asset.bytes : await compressedVariant(asset, encoding)
  if (encoding !== null) response.setHeader('content-encoding', encoding)
  response.writeHead(asset.status, {'content-length': body.length, 'accept-ranges': 'bytes'})
  response.end(head ? undefined : body)
}

function acceptedEncoding(request: http.IncomingMessage): Encoding | null {
  const accepted = new Map<string, number>()
  for (const part of String(request.headers['accept-encoding'] ?? '').split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';')
    const q = params.map((param) => /^\s*q=([\d.]+)\s*$/.exec(param)?.[1]).find(Boolean)
    if (name) accepted.set(name, q === undefined ? 1 : Number(q))
  }
  if ((accepted.get('br') ?? 0) > 0) return 'br'
  if ((accepted.get('gzip') ?? 0) > 0) return 'gzip'
  return null
}

async function compressedVariant(asset: AssetBody, encoding: Encoding): Promise<Buffer> {
  const key = `${asset.sha256}:${encoding}`
  const cached = compressed.get(key)
  if (cached) return cached
  const body =
    encoding === 'br'
      ? await brotli(asset.bytes, {params: {[zlibConstants.BROTLI_PARAM_QUALITY]: 5, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: asset.bytes.length}})
      : await gzipAsync(asset.bytes, {level: 6})
  if (compressedBytes + body.length > COMPRESSED_CACHE_BYTES) {
    compressed.clear()
    compressedBytes = 0
  }
  compressed.set(key, body)
  compressedBytes += body.length
  return body
}

/** True when the header names this content's ETag (any variant, weak or strong) or is `*`. */
function matchesIfNoneMatch(header: string | undefined, sha256: string): boolean {
  if (header === undefined) return false
  const tag = sha256.slice(0, 32)
  return header.split(',').some((entry) => {
    const value = entry.trim().replace(/^W\//, '')
    return value === '*' || value === `"${tag}"` || value.startsWith(`"${tag}-`)
  })
}

/** One byte range [start, end] (inclusive); null for a header to ignore (several ranges, not bytes). */
function parseRange(header: string, size: number): [number, number] | null | 'unsatisfiable' {
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  if (!match || (match[1] === '' && match[2] === '')) return null
  if (match[1] === '') {
    const suffix = Number(match[2])
    if (suffix === 0) return 'unsatisfiable'
    return [Math.max(0, size - suffix), size - 1]
  }
  const start = Number(match[1])
  const end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1)
  if (start >= size || end < start) return 'unsatisfiable'
  return [start, end]
}
