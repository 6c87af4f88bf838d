// Static assets against the oracle: the same wrangler projects deployed to a real edge host and run
// by `wrangler dev` (wrangler from npm, offline), asked the same requests; status, body, content
// type, Location, cache-control, the `_headers` headers, ETag presence and the 304 on revalidation
// must agree. Requests carry no Accept-Encoding: workerd under wrangler dev compresses even tiny
// bodies, which is transport, not asset semantics (compression is checked in assets.test.ts).
import {execFile} from 'node:child_process'
import {readdirSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'
import {request} from 'undici'
import {expect, test} from 'vitest'
import {kitWithHost} from '../support/cli-kit.js'
import {startWranglerDev} from '../../scripts/wrangler-offline.js'

const kit = kitWithHost('assets-oracle', {settings: {shards: 1}})
// A date wrangler's own workerd supports.
const COMPATIBILITY_DATE = '2026-04-01'

interface Probe {
  path: string
  method?: 'GET' | 'HEAD'
  headers?: Record<string, string>
}

const COMPARED_HEADERS = ['content-type', 'location', 'cache-control', 'content-range']

async function answer(base: string, probe: Probe, extraHeaders: readonly string[]) {
  const response = await request(`${base}${probe.path}`, {method: probe.method ?? 'GET', headers: probe.headers ?? {}})
  const body = Buffer.from(await response.body.arrayBuffer()).toString()
  const headers: Record<string, unknown> = {}
  for (const name of [...COMPARED_HEADERS, ...extraHeaders]) headers[name] = response.headers[name]
  const etag = response.headers.etag as string | undefined
  let revalidated: number | undefined
  if (etag !== undefined && response.statusCode === 200) {
    revalidated = (await request(`${base}${probe.path}`, {headers: {...probe.headers, 'if-none-match': etag}}).then(async (r) => (await r.body.dump(), r)))
      .statusCode
  }
  return {status: response.statusCode, body, headers, etag: etag !== undefined, revalidated}
}

/**
 * Deploys `files` through the CLI and runs them under `wrangler dev`; every probe must be answered
 * alike. Returns the host's answers, for the checks that the probes exercised what they meant to.
 */
async function compareWithWranglerDev(name: string, files: Record<string, string | Buffer>, probes: Probe[], extraHeaders: readonly string[] = []) {
  const dir = kit.project(name, files)
  return compareProjectWithWranglerDev(dir, probes, extraHeaders)
}

async function compareProjectWithWranglerDev(dir: string, probes: Probe[], extraHeaders: readonly string[] = []) {
  // wrangler dev's state (.wrangler/) is not in the deployed project: it starts once the deploy has read it.
  const {url} = await kit.deploy(dir)
  const dev = await startWranglerDev(dir, path.join(kit.root, 'wrangler-home'))
  try {
    const hostBase = url.replace(/\/$/, '')
    const host = []
    const oracle = []
    for (const probe of probes) {
      host.push({probe: probe.path, ...(await answer(hostBase, probe, extraHeaders))})
      oracle.push({probe: probe.path, ...(await answer(dev.url, probe, extraHeaders))})
    }
    expect(host).toEqual(oracle)
    return new Map(host.map((entry, index) => [`${probes[index]!.method ?? 'GET'} ${entry.probe}`, entry]))
  } finally {
    await dev.stop()
  }
}

// The extensions the host's content-type table knows (src/edge-host/assets/content-type.ts).
const EXTENSIONS =
  'html htm css js mjs cjs json map webmanifest txt md csv xml svg png jpg jpeg gif webp avif ico bmp woff woff2 ttf otf eot wasm pdf zip gz mp3 wav ogg mp4 webm'.split(
    ' ',
  )

const WORKER = [
  'export default {async fetch(request, env) {',
  '  const url = new URL(request.url)',
  '  if (url.pathname === "/api/asset") return env.ASSETS.fetch(new Request(new URL("/docs/guide", url)))',
  '  return new Response("worker " + request.method + " " + url.pathname)',
  '}}',
].join('\n')

test('a site with a Worker, _headers, _redirects and run_worker_first answers as wrangler dev does', {timeout: 180_000}, async () => {
  const answers = await compareWithWranglerDev(
    'site',
    {
      'wrangler.toml': [
        'name = "site"',
        'main = "worker.js"',
        `compatibility_date = "${COMPATIBILITY_DATE}"`,
        '[assets]',
        'directory = "./public"',
        'binding = "ASSETS"',
        'run_worker_first = ["/api/*", "!/api/public/*"]',
      ].join('\n'),
      'worker.js': WORKER,
      'public/index.html': '<h1>home</h1>',
      'public/about.html': '<h1>about</h1>',
      'public/docs/index.html': '<h1>docs</h1>',
      'public/docs/guide.html': '<h1>guide</h1>',
      'public/style.css': 'body { color: #333 }\n'.repeat(100),
      'public/app.js': 'console.log("app")\n',
      'public/data.json': '{"ok": true}\n',
      'public/logo.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>',
      'public/notes.unknownext': 'what type?',
      ...Object.fromEntries(EXTENSIONS.map((extension) => [`public/types/file.${extension}`, `a .${extension} file`])),
      'public/api/hidden.txt': 'claimed by the Worker',
      'public/api/public/open.txt': 'excluded from run_worker_first',
      'public/secret.txt': 'ignored',
      'public/.assetsignore': 'secret.txt\n',
      'public/_headers': [
        '/*',
        '  X-Site: demo',
        '  X-Frame-Options: DENY',
        '/docs/*',
        '  X-Docs: :splat',
        '  ! X-Frame-Options',
        '/blog/:slug',
        '  X-Slug: :slug',
        '/*.css',
        '  Cache-Control: public, max-age=31536000, immutable',
      ].join('\n'),
      'public/_redirects': [
        '# static and dynamic rules, every status',
        '/old /about 301',
        '/temp /about',
        '/see /about 303',
        '/keep /about 307',
        '/perm /about 308',
        '/blog/:slug /posts/:slug',
        '/files/* /downloads/:splat 301',
        '/external https://example.com/landing 302',
        '/rewrite /about.html 200',
        '/pretty /about 200',
        '/nowhere /no-such-page 200',
        '/about /docs/ 301',
      ].join('\n'),
    },
    [
      ...[
        '/',
        '/index.html',
        '/index',
        '/about',
        '/about.html',
        '/about/',
        '/docs',
        '/docs/',
        '/docs/index.html',
        '/docs/guide',
        '/docs/guide.html',
        '/docs/guide/',
      ].map((p) => ({path: p})),
      ...['/style.css', '/app.js', '/data.json', '/logo.svg', '/notes.unknownext'].map((p) => ({path: p})),
      ...EXTENSIONS.map((extension) => ({path: `/types/file.${extension}`})),
      ...['/old', '/temp', '/see', '/keep', '/perm', '/blog/hello', '/blog/hello?x=1', '/files/a/b.zip', '/external', '/rewrite', '/pretty', '/nowhere'].map(
        (p) => ({path: p}),
      ),
      ...['/nothing', '/secret.txt', '/.assetsignore', '/_headers', '/_redirects', '/api/hidden.txt', '/api/public/open.txt', '/api/asset'].map((p) => ({
        path: p,
      })),
      {path: '/style.css', method: 'HEAD'},
      {path: '/about', method: 'HEAD'},
    ],
    ['x-site', 'x-frame-options', 'x-docs', 'x-slug'],
  )
  // The probes reached what they meant to: an asset, a redirect, a rewrite, the Worker, the binding.
  expect(answers.get('GET /docs/guide')).toMatchObject({status: 200, body: '<h1>guide</h1>', etag: true, revalidated: 304})
  expect(answers.get('GET /old')).toMatchObject({status: 301, headers: {location: '/about'}})
  // A 200 rewrite serves what its destination resolves to: /about.html redirects to /about, /about is served.
  expect(answers.get('GET /rewrite')).toMatchObject({status: 307, headers: {location: '/about'}})
  expect(answers.get('GET /pretty')).toMatchObject({status: 200, body: '<h1>about</h1>'})
  expect(answers.get('GET /nowhere')).toMatchObject({status: 404, body: ''})
  expect(answers.get('GET /api/hidden.txt')).toMatchObject({status: 200, body: 'worker GET /api/hidden.txt'})
  expect(answers.get('GET /api/asset')).toMatchObject({status: 200, body: '<h1>guide</h1>'})
})

const PAGES = {
  'site/index.html': 'home',
  'site/about.html': 'about',
  'site/docs/index.html': 'docs',
  'site/docs/guide.html': 'guide',
  'site/404.html': 'top 404',
  'site/blog/404.html': 'blog 404',
  'site/blog/first/index.html': 'first post',
}
const PAGE_PROBES = [
  '/',
  '/index',
  '/index.html',
  '/about',
  '/about/',
  '/about.html',
  '/about/index.html',
  '/docs',
  '/docs/',
  '/docs/index',
  '/docs/index.html',
  '/docs/guide',
  '/docs/guide/',
  '/docs/guide.html',
  '/blog/first',
  '/blog/first/',
  '/blog/missing',
  '/missing',
  '/docs/missing/deeper',
  '/a%20b',
].map((p) => ({path: p}))

for (const [html, notFound] of [
  ['auto-trailing-slash', '404-page'],
  ['force-trailing-slash', 'single-page-application'],
  ['drop-trailing-slash', '404-page'],
  ['none', 'none'],
] as const) {
  // Concurrent: most of each is waiting for a deploy and for wrangler dev to start.
  test.concurrent(`an assets-only site, html_handling ${html} and not_found_handling ${notFound}, answers as wrangler dev does`, {
    timeout: 180_000,
  }, async () => {
    const answers = await compareWithWranglerDev(
      `pages-${html}`,
      {
        'wrangler.toml': `name = "pages"\ncompatibility_date = "${COMPATIBILITY_DATE}"\n[assets]\ndirectory = "site"\nhtml_handling = "${html}"\nnot_found_handling = "${notFound}"\n`,
        ...PAGES,
      },
      [...PAGE_PROBES, {path: '/missing', method: 'HEAD'}],
    )
    expect(answers.get('GET /docs/guide.html')?.status).toBe(html === 'none' ? 200 : 307)
  })
}

const VITE_BIN = fileURLToPath(new URL('../../node_modules/vite/bin/vite.js', import.meta.url))

test('a Vite-built single-page app with an API Worker answers as wrangler dev does', {timeout: 180_000}, async () => {
  const dir = kit.project('vite-spa', {
    'package.json': JSON.stringify({name: 'vite-spa', private: true, type: 'module', scripts: {build: 'vite build'}}),
    'wrangler.jsonc': JSON.stringify({
      name: 'vite-spa',
      main: 'worker/index.js',
      compatibility_date: COMPATIBILITY_DATE,
      assets: {directory: './dist', binding: 'ASSETS', not_found_handling: 'single-page-application', run_worker_first: ['/api/*']},
    }),
    'worker/index.js': 'export default {fetch(request) { return Response.json({path: new URL(request.url).pathname}) }}\n',
    'index.html':
      '<!doctype html><html><head><title>spa</title><link rel="icon" href="/favicon.svg"></head><body><div id="app"></div><script type="module" src="/src/main.js"></script></body></html>\n',
    'src/main.js': "import './style.css'\nimport {render} from './view.js'\nrender(document.querySelector('#app'), location.pathname)\n",
    'src/view.js': 'export function render(element, path) { element.textContent = "route " + path }\n',
    'src/style.css': '#app { font-family: sans-serif; color: #222; }\n',
    'public/favicon.svg': '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"/>',
  })
  // What `npm run build` runs: Vite writes dist/ with hashed bundles.
  await promisify(execFile)(process.execPath, [VITE_BIN, 'build', '--logLevel', 'error'], {cwd: dir})
  const bundles = readdirSync(path.join(dir, 'dist', 'assets')).map((file) => `/assets/${file}`)
  expect(bundles.map((file) => path.extname(file)).sort()).toEqual(['.css', '.js'])
  const answers = await compareProjectWithWranglerDev(
    dir,
    ['/', '/index.html', ...bundles, '/favicon.svg', '/settings/profile', '/deep/link/page', '/missing.png', '/api/users', '/assets/missing.js'].map((p) => ({
      path: p,
    })),
  )
  expect(answers.get('GET /settings/profile')).toMatchObject({status: 200, body: expect.stringContaining('<div id="app">')})
  expect(answers.get(`GET ${bundles.find((file) => file.endsWith('.js'))}`)).toMatchObject({
    status: 200,
    headers: {'content-type': 'text/javascript; charset=utf-8'},
  })
  expect(answers.get('GET /api/users')).toMatchObject({status: 200, body: '{"path":"/api/users"}'})
})
