// Content types by extension, as wrangler's asset manifest gives them (the `mime` package's
// standard types): `text/*` with `; charset=utf-8`, and no content-type at all for an extension
// it does not know. test/assets/wrangler-dev.test.ts checks every extension here against it.
const TYPES: Readonly<Record<string, string>> = {
  html: 'text/html',
  htm: 'text/html',
  css: 'text/css',
  js: 'text/javascript',
  mjs: 'text/javascript',
  cjs: 'application/node',
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
  ico: 'image/vnd.microsoft.icon',
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

/** The content-type of an asset at `path`; undefined for an unknown extension (sent without one). */
export function contentTypeOf(path: string): string | undefined {
  const name = path.slice(path.lastIndexOf('/') + 1)
  const dot = name.lastIndexOf('.')
  const type = dot === -1 ? undefined : TYPES[name.slice(dot + 1).toLowerCase()]
  return type?.startsWith('text/') ? `${type}; charset=utf-8` : type
}

/** Worth compressing: text, scripts, JSON, XML, SVG, wasm, icons, uncompressed fonts; not images, archives or media. */
export function isCompressible(contentType: string | undefined): boolean {
  if (contentType === undefined) return false
  const type = contentType.split(';')[0]!
  return (
    type.startsWith('text/') ||
    ['application/json', 'application/manifest+json', 'application/xml', 'application/node', 'image/svg+xml', 'application/wasm'].includes(type) ||
    ['image/vnd.microsoft.icon', 'font/ttf', 'font/otf'].includes(type)
  )
}
