// Static assets against the oracle: the same wrangler projects deployed to a real edge host and run
// by `wrangler dev` (wrangler from npm, offline), asked the same requests; status, body, content
// type, Location, cache-control, the `_headers` headers, ETag presence and the 304 on revalidation
// must agree. Requests carry no Accept-Encoding: workerd under wrangler dev compresses even tiny
// bodies, which is transport, not asset semantics (compression is checked in assets.test.ts).
import path from 'node:path'
import {request} from 'undici'
import {expect, test} from 'vitest'
import {kitWithHost} from '../support/cli-kit.js'
import {startWranglerDev} from '../support/wrangler-oracle.js'

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
    revalidated = (await request(`${base}${probe.path}`, {headers: {...probe.headers, 'if-none-match': etag}}).then(async (r) => (await r.body.dump(), r))).statusCode
  }
  return {status: response.statusCode, body, headers, etag: etag !== undefined, revalidated}
}

/**
 * Deploys `files` through the CLI and runs them under `wrangler dev`; every probe must be answered
 * alike. Returns the host's answers, for the checks that the probes exercised what they meant to.
 */
async function compareWithWranglerDev(name: string, files: Record<string, string | Buffer>, probes: Probe[], extraHeaders: readonly string[] = []) {
  const dir = kit.project(name, files)
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
    if (process.env.ORACLE_DUMP) (await import("node:fs")).writeFileSync(process.env.ORACLE_DUMP + name + ".json", JSON.stringify({host, oracle}))
    expect(host).toEqual(oracle)
    return new Map(host.map((entry, index) => [`${probes[index]!.method ?? 'GET'} ${entry.probe}`, entry]))
  } finally {
    await dev.stop()
  }
}

const WORKER = [
  'export default {async fetch(request, env) {',
  '  const url = new URL(request.url)',
  '  if (url.pathname === "/api/asset") return env.ASSETS.fetch(new Request(new URL("/about", url)))',
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
        '/about /docs/ 301',
      ].join('\n'),
    },
    [
      ...['/', '/index.html', '/index', '/about', '/about.html', '/about/', '/docs', '/docs/', '/docs/index.html', '/docs/guide', '/docs/guide.html', '/docs/guide/'].map(
        (p) => ({path: p}),
      ),
      ...['/style.css', '/app.js', '/data.json', '/logo.svg', '/notes.unknownext'].map((p) => ({path: p})),
      ...['/old', '/temp', '/see', '/keep', '/perm', '/blog/hello', '/blog/hello?x=1', '/files/a/b.zip', '/external', '/rewrite'].map((p) => ({path: p})),
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
  expect(answers.get('GET /rewrite')).toMatchObject({status: 200, body: '<h1>about</h1>'})
  expect(answers.get('GET /api/hidden.txt')).toMatchObject({status: 200, body: 'worker GET /api/hidden.txt'})
  expect(answers.get('GET /api/asset')).toMatchObject({status: 200, body: '<h1>about</h1>'})
})
