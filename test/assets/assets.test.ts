// Static assets through the CLI against a real edge host and real workerd: a wrangler site with
// _headers and _redirects, html_handling, SPA fallback, run_worker_first, the assets binding,
// ETag/304, Range, HEAD and compression, a tampered asset caught by the integrity check, a deploy
// of one changed file sending only that file, an asset URL answering exactly as the Worker's under
// a refusing access policy and a lockdown, and retirement answering 404 for an asset URL.
// What `wrangler dev` does not show (compression, Range, metrics, the integrity check, retirement)
// is checked here; wrangler-dev.test.ts compares the answers with `wrangler dev` as the oracle.
import {spawn} from 'node:child_process'
import {createHash} from 'node:crypto'
import {existsSync, readFileSync, readdirSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {gunzipSync} from 'node:zlib'
import {request} from 'undici'
import {expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine} from '../../src/engine/context.js'
import {requireProvider} from '../../src/engine/provider.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {openStore} from '../../src/store/index.js'
import {CLI_BIN, runCli} from '../support/cli.js'
import {kitWithHost} from '../support/cli-kit.js'
import {startTestHost} from '../support/host.js'

const received: Array<{files: number; bytes: number}> = []
const kit = kitWithHost('assets', {
  // Unreferenced asset files go at once, so the test sees them go.
  settings: {shards: 1, asset_unreferenced_grace_seconds: 0},
  onLog: (entry) => {
    if (entry.msg === 'asset files received') received.push({files: entry.files as number, bytes: entry.bytes as number})
  },
})
const {cli, project, deploy} = kit

async function get(url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') {
  const response = await request(url, {method, headers})
  const body = Buffer.from(await response.body.arrayBuffer())
  return {status: response.statusCode, headers: response.headers as Record<string, string | undefined>, body}
}

const LARGE_CSS = `${'body { color: #333; margin: 0 auto; }\n'.repeat(400)}`

test('a wrangler site: html_handling, _headers, _redirects, ETag/304, Range, HEAD, gzip, run_worker_first and the assets binding', {
  timeout: 180_000,
}, async () => {
  const dir = project('site', {
    'wrangler.toml': [
      'name = "site"',
      'main = "worker.js"',
      'compatibility_date = "2026-11-01"',
      '[assets]',
      'directory = "./public"',
      'binding = "ASSETS"',
      'run_worker_first = ["/api/*"]',
    ].join('\n'),
    'worker.js': [
      'export default {async fetch(request, env) {',
      '  const url = new URL(request.url)',
      '  if (url.pathname === "/api/asset") return env.ASSETS.fetch(new Request(new URL("/about", url)))',
      '  return new Response("worker " + url.pathname)',
      '}}',
    ].join('\n'),
    'public/index.html': '<h1>home</h1>',
    'public/about.html': '<h1>about</h1>',
    'public/docs/index.html': '<h1>docs</h1>',
    'public/style.css': LARGE_CSS,
    'public/api/hidden.txt': 'never served: run_worker_first claims /api/*',
    'public/secret.txt': 'ignored',
    'public/.assetsignore': 'secret.txt\n',
    'public/_headers': '/*\n  X-Site: demo\n/docs/*\n  X-Docs: :splat\n',
    'public/_redirects': '/old /about 301\n/blog/:slug /posts/:slug\n/rewrite /about 200\n',
  })
  const plan = await cli('deploy', dir, '--dry-run', '--json')
  expect(JSON.parse(plan.stdout).assets).toEqual({files: 5, bytes: expect.any(Number), binding: 'ASSETS'})
  const {url, department} = await deploy(dir)
  const at = (pathname: string) => new URL(pathname.slice(1), url).toString()

  const home = await get(at('/'))
  expect({status: home.status, type: home.headers['content-type'], site: home.headers['x-site'], body: home.body.toString()}).toEqual({
    status: 200,
    type: 'text/html; charset=utf-8',
    site: 'demo',
    body: '<h1>home</h1>',
  })
  expect(home.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
  // auto-trailing-slash: /about serves about.html; /about.html and /docs redirect (307) to the canonical path.
  expect((await get(at('/about'))).body.toString()).toBe('<h1>about</h1>')
  expect(await get(at('/about.html')).then((r) => [r.status, r.headers.location])).toEqual([307, '/about'])
  expect(await get(at('/docs')).then((r) => [r.status, r.headers.location])).toEqual([307, '/docs/'])
  const docs = await get(at('/docs/'))
  expect([docs.body.toString(), docs.headers['x-docs']]).toEqual(['<h1>docs</h1>', ''])
  // _redirects: a static 301, a placeholder with the default 302, a 200 rewrite.
  expect(await get(at('/old')).then((r) => [r.status, r.headers.location])).toEqual([301, '/about'])
  expect(await get(at('/blog/hello?x=1')).then((r) => [r.status, r.headers.location])).toEqual([302, '/posts/hello?x=1'])
  expect((await get(at('/rewrite'))).body.toString()).toBe('<h1>about</h1>')
  // Not an asset, .assetsignore'd, or claimed by run_worker_first: the Worker answers.
  expect((await get(at('/nothing'))).body.toString()).toBe('worker /nothing')
  expect((await get(at('/secret.txt'))).body.toString()).toBe('worker /secret.txt')
  expect((await get(at('/api/hidden.txt'))).body.toString()).toBe('worker /api/hidden.txt')
  expect((await get(at('/_headers'))).body.toString()).toBe('worker /_headers')
  // The binding answers from the same assets.
  const bound = await get(at('/api/asset'))
  expect([bound.status, bound.body.toString()]).toEqual([200, '<h1>about</h1>'])

  const css = await get(at('/style.css'))
  expect([css.status, css.headers['content-type'], css.body.toString()]).toEqual([200, 'text/css; charset=utf-8', LARGE_CSS])
  const etag = css.headers.etag!
  expect(etag).toMatch(/^"[0-9a-f]{32}"$/)
  expect((await get(at('/style.css'), {'if-none-match': etag})).status).toBe(304)
  const range = await get(at('/style.css'), {range: 'bytes=5-9'})
  expect([range.status, range.headers['content-range'], range.body.toString()]).toEqual([206, `bytes 5-9/${LARGE_CSS.length}`, LARGE_CSS.slice(5, 10)])
  expect((await get(at('/style.css'), {range: `bytes=${LARGE_CSS.length}-`})).status).toBe(416)
  const head = await get(at('/style.css'), {}, 'HEAD')
  expect([head.status, head.headers['content-length'], head.body.length]).toEqual([200, String(LARGE_CSS.length), 0])
  const zipped = await get(at('/style.css'), {'accept-encoding': 'gzip'})
  expect([zipped.headers['content-encoding'], zipped.headers.vary, gunzipSync(zipped.body).toString()]).toEqual(['gzip', 'Accept-Encoding', LARGE_CSS])
  expect(zipped.body.length).toBeLessThan(LARGE_CSS.length / 10)
  expect((await get(at('/style.css'), {'accept-encoding': 'gzip', 'if-none-match': zipped.headers.etag!})).status).toBe(304)

  // tail: an asset-only request is an event marked `asset`; a request the Worker ran is not.
  const tail = spawn(process.execPath, [CLI_BIN, 'tail', department, '--format', 'json', '--data-dir', kit.dataDir], {
    env: {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined},
  })
  let tailed = ''
  tail.stdout.on('data', (chunk: Buffer) => (tailed += chunk.toString()))
  const tailEvents = () =>
    tailed
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as {path: string; status: number; asset?: boolean})
  try {
    // Each poll sends both requests again: the tail may connect after the first ones.
    await expect
      .poll(
        async () => {
          await get(at('/about'))
          await get(at('/nothing'))
          const events = tailEvents()
          return [events.find((event) => event.path === '/about'), events.find((event) => event.path === '/nothing')]
        },
        {timeout: 30_000},
      )
      .toEqual([expect.objectContaining({status: 200, asset: true}), expect.not.objectContaining({asset: true})])
  } finally {
    tail.kill('SIGINT')
  }

  const metrics = (await get(`${kit.host.adminUrl}/metrics`)).body.toString()
  expect(metrics).toMatch(/edgeworkers_host_asset_responses_total\{script="dw-[0-9a-f]{48}",department="d\d+",status="200",via="direct"\} \d+/)
})

test('an assets-only SPA: index.html for unknown paths, 404.html handling, and a changed file is the only one sent', {timeout: 180_000}, async () => {
  const files: Record<string, string> = {}
  for (let index = 0; index < 50; index++) files[`public/chunk-${index}.js`] = `export const chunk = ${index};\n${'//'.repeat(512)}\n`
  const dir = project('spa', {
    'wrangler.jsonc':
      '{"name": "spa", "compatibility_date": "2026-11-01", // assets only\n "assets": {"directory": "public", "not_found_handling": "single-page-application"}}',
    'public/index.html': '<div id="app"></div>',
    ...files,
  })
  const before = received.length
  const {url, department} = await deploy(dir)
  const firstSent = received.slice(before).reduce((sum, entry) => sum + entry.files, 0)
  expect(firstSent).toBe(51)
  const spa = await get(new URL('settings/profile', url).toString())
  expect([spa.status, spa.body.toString()]).toEqual([200, '<div id="app"></div>'])
  expect((await get(new URL('chunk-3.js', url).toString())).headers['content-type']).toBe('text/javascript; charset=utf-8')

  // One file changed: only its bytes go to the host.
  const changed = 'export const chunk = "changed";\n'
  writeFileSync(path.join(dir, 'public', 'chunk-7.js'), changed)
  const mark = received.length
  await deploy(dir, department)
  expect(received.slice(mark)).toEqual([{files: 1, bytes: Buffer.byteLength(changed)}])
  expect((await get(new URL('chunk-7.js', url).toString())).body.toString()).toBe(changed)

  const notFound = project('four-oh-four', {
    'wrangler.toml': 'name = "nf"\ncompatibility_date = "2026-11-01"\n[assets]\ndirectory = "site"\nnot_found_handling = "404-page"\n',
    'site/index.html': 'home',
    'site/404.html': 'top 404',
    'site/blog/404.html': 'blog 404',
  })
  const nf = await deploy(notFound)
  const blogMissing = await get(new URL('blog/missing', nf.url).toString())
  expect([blogMissing.status, blogMissing.body.toString()]).toEqual([404, 'blog 404'])
  expect(await get(new URL('elsewhere', nf.url).toString()).then((r) => [r.status, r.body.toString()])).toEqual([404, 'top 404'])
})

test('a backup restores the host with its asset files; files no served release names leave the host', {timeout: 180_000}, async () => {
  const hostFile = (content: string) => {
    const sha256 = createHash('sha256').update(content).digest('hex')
    return path.join(kit.host.dataDir, 'assets', sha256.slice(0, 2), sha256)
  }
  const dir = project('kept', {
    'wrangler.toml': 'name = "kept"\ncompatibility_date = "2026-11-01"\n[assets]\ndirectory = "public"\n',
    'public/keep.txt': 'kept across versions',
    'public/version.txt': 'version 1',
  })
  const {url, department} = await deploy(dir)

  // backup create → restore into a new host data dir → a host started there serves the assets.
  const backup = path.join(kit.root, 'backup')
  const created = await cli('backup', 'create', backup, '--json')
  expect(created.code, created.stderr).toBe(0)
  const restoredHostDir = path.join(kit.root, 'restored-host')
  const restored = await runCli(['backup', 'restore', backup, '--host-data-dir', restoredHostDir, '--json', '--data-dir', path.join(kit.root, 'restored-kit')])
  expect(restored.code, restored.stderr).toBe(7) // restored; verification waits for the host to start
  const restoredHost = await startTestHost({dataDir: restoredHostDir, settings: {shards: 1}})
  try {
    const script = new URL(url).pathname.split('/')[1]
    const served = await get(`${restoredHost.publicUrl}/${script}/keep.txt`)
    expect([served.status, served.body.toString()]).toEqual([200, 'kept across versions'])
  } finally {
    await restoredHost.stop()
  }

  // The host keeps the files of the release it serves and the one before; older ones go.
  for (const version of [2, 3]) {
    writeFileSync(path.join(dir, 'public', 'version.txt'), `version ${version}`)
    await deploy(dir, department)
  }
  await expect.poll(() => existsSync(hostFile('version 1'))).toBe(false)
  expect(['kept across versions', 'version 2', 'version 3'].map((content) => existsSync(hostFile(content)))).toEqual([true, true, true])
  expect((await get(new URL('version.txt', url).toString())).body.toString()).toBe('version 3')
  // Retired: none of its files is served any more, so none is kept.
  expect((await cli('retire', department, '--yes', '--json')).code).toBe(0)
  await expect.poll(() => ['kept across versions', 'version 2', 'version 3'].some((content) => existsSync(hostFile(content)))).toBe(false)
})

test('asset limits and bad rule files are refused with one line naming the cause, and nothing is written', {timeout: 120_000}, async () => {
  const dir = project('limits', {
    'wrangler.toml': 'name = "limits"\ncompatibility_date = "2026-11-01"\n[assets]\ndirectory = "public"\n',
    'public/a.txt': 'a'.repeat(10),
    'public/big.bin': 'b'.repeat(3000),
    'public/bigger.bin': 'c'.repeat(5000),
  })
  const refusal = async (env: Record<string, string>) => {
    const result = await runCli(['deploy', dir, '--department', 'limits', '--data-dir', kit.dataDir], env)
    return {
      code: result.code,
      lines: result.stderr
        .trimEnd()
        .split('\n')
        .filter((line) => line.startsWith('error:')),
    }
  }
  expect(await refusal({EDGEWORKERS_DEPLOY__ASSETS_MAX_FILES: '2'})).toEqual({
    code: 2,
    lines: [
      `error: assets directory ${path.join(dir, 'public')} holds 3 files; at most 2 per version (deploy.assets_max_files; .assetsignore leaves files out)`,
    ],
  })
  // The refusal names the largest files first.
  expect(await refusal({EDGEWORKERS_DEPLOY__ASSET_MAX_BYTES: '2048'})).toEqual({
    code: 2,
    lines: [
      `error: assets directory ${path.join(dir, 'public')}: 2 files are over 2 KiB per file (deploy.asset_max_bytes): bigger.bin (4.9 KiB), big.bin (2.9 KiB)`,
    ],
  })
  writeFileSync(path.join(dir, 'public', '_redirects'), '/from /to 304\n')
  expect(await refusal({})).toEqual({code: 2, lines: [expect.stringMatching(/_redirects line 1: status 304 is not one of 200, 301, 302, 303, 307, 308/)]})
  // Nothing was stored: no version of a Worker for this department.
  expect((await cli('worker', 'list', '--json')).stdout).not.toContain('"limits"')
})

/** What a client can tell two answers apart by; the request id is each request's own. */
async function answerOf(url: string, headers: Record<string, string> = {}) {
  const response = await request(url, {headers})
  const body = (await response.body.text()).replace(/"requestId":"[0-9a-f-]{36}"/, '"requestId":"…"')
  return {status: response.statusCode, type: response.headers['content-type'], body}
}

test('an asset URL answers as the Worker does under an access policy that refuses the client, a lockdown, and after retirement', {
  timeout: 180_000,
}, async () => {
  const dir = project('guarded', {
    'wrangler.toml': 'name = "guarded"\nmain = "worker.js"\ncompatibility_date = "2026-11-01"\n[assets]\ndirectory = "public"\n',
    'worker.js': 'export default {fetch: (request) => new Response("worker " + new URL(request.url).pathname)}',
    'public/logo.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>',
  })
  const {url, department, script} = await deploy(dir)
  const asset = new URL('logo.svg', url).toString()
  const code = new URL('api/x', url).toString()
  expect(await answerOf(asset)).toMatchObject({status: 200, type: 'image/svg+xml', body: '<svg xmlns="http://www.w3.org/2000/svg"/>'})
  expect(await answerOf(code)).toMatchObject({status: 200, body: 'worker /api/x'})

  // teamsync_internal with no allowed address: nobody gets in.
  expect((await cli('access-policy', 'set', department, '--mode', 'teamsync_internal', '--json')).code).toBe(0)
  const deniedByAddress = await answerOf(code)
  expect(deniedByAddress).toEqual({status: 403, type: 'application/json', body: '{"code":"access_denied","message":"Forbidden"}'})
  expect(await answerOf(asset)).toEqual(deniedByAddress)

  // api_key: without the key refused as the Worker is; with it the asset is served.
  const keyFile = path.join(kit.root, 'api-key')
  expect((await cli('api-key', 'rotate', department, '--key-file', keyFile, '--json')).code).toBe(0)
  const apiKey = readFileSync(keyFile, 'utf8').trim()
  expect(await answerOf(asset)).toEqual(await answerOf(code))
  expect(await answerOf(asset, {'x-api-key': 'wrong'})).toEqual(deniedByAddress)
  expect(await answerOf(asset, {'x-api-key': apiKey})).toMatchObject({status: 200, type: 'image/svg+xml'})

  // Lockdown (retirement's first step), told to the host through the provider as retire tells it.
  const settings = settingsSchema.parse({data_dir: kit.dataDir})
  const store = await openStore(settings)
  try {
    const engine = await createEngine(store, settings, onPremHosts)
    await (await requireProvider(engine, 'lock the Worker down')).provider.lockdownScript(script)
  } finally {
    await store.close()
  }
  const locked = await answerOf(code, {'x-api-key': apiKey})
  expect(locked).toEqual({status: 403, type: 'application/json', body: '{"code":"worker_retired","message":"Forbidden"}'})
  expect(await answerOf(asset, {'x-api-key': apiKey})).toEqual(locked)
  expect(await answerOf(asset)).toEqual(locked)

  // Retired: the exact 404 of a Worker that never existed.
  expect((await cli('retire', department, '--yes', '--json')).code).toBe(0)
  const never = await answerOf(`${kit.host.publicUrl}/dw-${'0'.repeat(48)}/logo.svg`)
  expect(never).toEqual({status: 404, type: 'application/json', body: '{"code":"worker_not_found","message":"Worker not found","requestId":"…"}'})
  expect(await answerOf(asset, {'x-api-key': apiKey})).toEqual(never)
  expect(await answerOf(code)).toEqual(never)
})

// Last: it damages every asset file in the kit's artifact store.
test('a tampered asset fails the deploy integrity check; retirement answers an asset URL with the exact 404', {timeout: 180_000}, async () => {
  const dir = project('tamper', {
    'wrangler.toml': 'name = "tamper"\ncompatibility_date = "2026-11-01"\n[assets]\ndirectory = "public"\n',
    'public/index.html': 'tamper-proof',
    'public/logo.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>',
  })
  const {url, department, script} = await deploy(dir)
  const logo = new URL('logo.svg', url).toString()
  expect((await get(logo)).headers['content-type']).toBe('image/svg+xml')

  // A new version whose stored asset file is then altered in the kit's artifact store.
  writeFileSync(path.join(dir, 'public', 'index.html'), 'tamper-proof v2')
  const assetsDir = path.join(kit.dataDir, 'artifacts', 'asset', 'sha256')
  const submitted = await cli('deploy', dir, '--department', department, '--json', '--no-wait')
  expect(submitted.code, submitted.stderr).toBeLessThan(8)
  for (const shard of readdirSync(assetsDir)) {
    for (const file of readdirSync(path.join(assetsDir, shard))) writeFileSync(path.join(assetsDir, shard, file), 'tampered')
  }
  const reconciled = await cli('reconcile', '--json')
  expect(reconciled.stdout + reconciled.stderr).toContain('artifact_integrity_failed')
  // The host still serves the previous release, untouched.
  expect((await get(new URL('index.html', url).toString().replace(/index\.html$/, ''))).body.toString()).toBe('tamper-proof')

  const notFound = await get(`${kit.host.publicUrl}/no-such-worker/logo.svg`)
  const metrics = async () => (await get(`${kit.host.adminUrl}/metrics`)).body.toString()
  expect(await metrics()).toContain(`edgeworkers_host_asset_responses_total{script="${script}"`)
  const retired = await cli('retire', department, '--yes', '--json')
  expect(retired.code, retired.stderr).toBe(0)
  const after = await get(logo)
  expect(after.status).toBe(404)
  expect(JSON.parse(after.body.toString()).code).toBe(JSON.parse(notFound.body.toString()).code)
  expect(JSON.parse(after.body.toString()).message).toBe('Worker not found')
  // Its asset series leave the metrics with it.
  await expect.poll(metrics).not.toContain(`edgeworkers_host_asset_responses_total{script="${script}"`)
})
