// Content types by extension, as Cloudflare's asset worker sends them: text types with
// `charset=utf-8`, anything unknown as application/octet-stream.
const TYPES: Readonly<Record<string, string>> = {
  html: 'text/html',
  htm: 'text/html',
  css: 'text/css',
  js: 'application/javascript',
  mjs: 'application/javascript',
  cjs: 'application/javascript',
  json: 'application/json',
  map: 'application/json',
  webmanifest: 'application/manifest+json',
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  xml: 'application/xml',
  svg: 'image/svg+xml',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  avif: 'image/avif',
  ico: 'image/x-icon',
  bmp: 'image/bmp',
  woff: 'font/woff',
  woff2: 'font/woff2',
  ttf: 'font/ttf',
  otf: 'font/otf',
  eot: 'application/vnd.ms-fontobject',
  wasm: 'application/wasm',
  pdf: 'application/pdf',
  zip: 'application/zip',
  gz: 'application/gzip',
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  ogg: 'audio/ogg',
  mp4: 'video/mp4',
  webm: 'video/webm',
}

export function contentTypeOf(path: string): string {
  const name = path.slice(path.lastIndexOf('/') + 1)
  const dot = name.lastIndexOf('.')
  const type = dot === -1 ? undefined : TYPES[name.slice(dot + 1).toLowerCase()]
  if (type === undefined) return 'application/octet-stream'
  return isTextual(type) ? `${type}; charset=utf-8` : type
}

function isTextual(type: string): boolean {
  return (
    type.startsWith('text/') || ['application/javascript', 'application/json', 'application/manifest+json', 'application/xml', 'image/svg+xml'].includes(type)
  )
}

/** Worth compressing: text, scripts, JSON, SVG, wasm; not images, fonts already compressed, archives or media. */
export function isCompressible(contentType: string): boolean {
  const type = contentType.split(';')[0]!
  return isTextual(type) || type === 'application/wasm' || type === 'image/x-icon' || type === 'font/ttf' || type === 'font/otf'
}
