// Existing wrangler projects deploy as they are: TypeScript and npm packages bundled with esbuild
// (real packages from the npm registry, pinned), wrangler.toml / .json / .jsonc with comments,
// [env.<name>] sections, Durable Objects with migrations, refused cloud-only bindings, deterministic
// builds, and `init` → `deploy` for every template — through the CLI, against a real edge host.
import {copyFileSync, existsSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {request} from 'undici'
import {expect, test} from 'vitest'
import {TEMPLATES} from '../../src/engine/project/init.js'
import {runCli} from '../support/cli.js'
import {wranglerProjectsWorkspace} from '../support/wrangler-projects.js'

const FIXTURES = fileURLToPath(new URL('../../fixtures/workers', import.meta.url))
const PACKAGES = {hono: '4.10.4', 'itty-router': '5.0.22', zod: '4.1.12', react: '19.3.1', 'react-dom': '19.3.1', 'object-inspect': '1.14.0'}
const {root, cli, project, nextDepartment} = wranglerProjectsWorkspace('wrangler-projects', PACKAGES)

async function deploy(dir: string, ...flags: string[]): Promise<{url: string; warnings: string[]; stderr: string}> {
  const department = nextDepartment()
  expect((await cli('department', 'create', 'acme', department, '--id', department)).code).toBe(0)
  const result = await cli('deploy', dir, '--department', department, '--json', ...flags)
  expect({code: result.code, stderr: result.stderr}).toEqual({code: 0, stderr: expect.not.stringContaining('"level":40')})
  const outcome = JSON.parse(result.stdout) as {state: string; url: string; warnings: string[]}
  expect(outcome.state).toBe('completed')
  return {url: outcome.url, warnings: outcome.warnings, stderr: result.stderr}
}

async function get(url: string, init: {method?: 'GET' | 'POST'; body?: string} = {}) {
  const response = await request(url, {method: init.method ?? 'GET', body: init.body, headers: init.body ? {'content-type': 'application/json'} : {}})
  return {status: response.statusCode, headers: response.headers, body: await response.body.text()}
}

const HONO_APP = `import {Hono} from 'hono'
import type {MiddlewareHandler} from 'hono'

const tag: MiddlewareHandler = async (c, next) => {
  await next()
  c.header('x-middleware', 'ran')
}
const app = new Hono()
app.use('*', tag)
app.get('/', (c) => c.text('Hello Hono!'))
app.get('/items/:id', (c) => c.json({id: c.req.param('id'), typed: true as boolean}))
export default app
`

test('a TypeScript Hono app with a middleware and two routes, from wrangler.toml; the build is deterministic and its SBOM names hono', {
  timeout: 180_000,
}, async () => {
  const dir = project('hono', {
    'wrangler.toml':
      'name = "hono-app"\nmain = "src/index.ts"\ncompatibility_date = "2026-11-01"\naccount_id = "0123"\nworkers_dev = true\n[[routes]]\npattern = "example.com/*"\n',
    'src/index.ts': HONO_APP,
  })
  const [first, second] = await Promise.all([cli('deploy', dir, '--dry-run', '--json'), cli('deploy', dir, '--dry-run', '--json')])
  const plan = JSON.parse(first.stdout) as {
    digests: Record<string, string>
    releaseGeneration: string
    dependencies: Record<string, string>
    modules: Array<{name: string; type: string}>
    warnings: string[]
  }
  expect(JSON.parse(second.stdout)).toMatchObject({digests: plan.digests, releaseGeneration: plan.releaseGeneration})
  expect(plan.dependencies).toEqual({hono: PACKAGES.hono})
  expect(plan.modules).toEqual([{name: 'index.js', type: 'esModule', bytes: expect.any(Number)}])
  expect(plan.warnings).toEqual(['wrangler.toml: ignored on-prem: account_id, workers_dev, routes'])
  expect(JSON.parse((await cli('outbox', 'list', '--json')).stdout)).toEqual([])

  const {url, warnings} = await deploy(dir)
  expect(warnings).toEqual(['wrangler.toml: ignored on-prem: account_id, workers_dev, routes'])
  const home = await get(url)
  expect([home.status, home.body, home.headers['x-middleware']]).toEqual([200, 'Hello Hono!', 'ran'])
  expect(JSON.parse((await get(`${url}items/7`)).body)).toEqual({id: '7', typed: true})
})

test('itty-router from wrangler.json and zod from wrangler.jsonc with comments, a Durable Object with migrations and an [env.staging] section', {
  timeout: 180_000,
}, async () => {
  const itty = project('itty', {
    'wrangler.json': JSON.stringify({name: 'itty', main: 'src/index.js', compatibility_date: '2026-11-01'}),
    'src/index.js': `import {AutoRouter} from 'itty-router'\nconst router = AutoRouter()\nrouter.get('/hello/:name', ({params}) => ({hello: params.name}))\nexport default router\n`,
  })
  const zod = project('zod', {
    'wrangler.jsonc': `{
  // The top level is production; staging restates its Durable Object binding, as wrangler requires.
  "name": "validator",
  "main": "src/index.ts",
  "compatibility_date": "2026-11-01",
  "durable_objects": {"bindings": [{"name": "PROD_ONLY", "class_name": "Tally"}]},
  "migrations": [{"tag": "v1", "new_sqlite_classes": ["Tally"]}],
  "env": {
    "staging": {
      "durable_objects": {"bindings": [{"name": "TALLY", "class_name": "Tally"}]}, /* trailing comma next */
    },
  },
}`,
    'src/index.ts': `import {DurableObject} from 'cloudflare:workers'
import {z} from 'zod'
const Order = z.object({item: z.string().min(1), quantity: z.number().int().positive()})
interface Env { TALLY: DurableObjectNamespace<Tally> }
export class Tally extends DurableObject {
  async add(quantity: number): Promise<number> {
    const total = ((await this.ctx.storage.get<number>('total')) ?? 0) + quantity
    await this.ctx.storage.put('total', total)
    return total
  }
}
export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const parsed = Order.safeParse(await request.json().catch(() => null))
    if (!parsed.success) return Response.json({error: parsed.error.issues[0]?.path.join('.')}, {status: 400})
    const total = await env.TALLY.get(env.TALLY.idFromName(parsed.data.item)).add(parsed.data.quantity)
    return Response.json({item: parsed.data.item, total})
  },
}
`,
  })
  const [router, validator] = await Promise.all([deploy(itty), deploy(zod, '--env', 'staging')])
  expect(JSON.parse((await get(`${router.url}hello/ada`)).body)).toEqual({hello: 'ada'})
  expect(JSON.parse((await get(validator.url, {method: 'POST', body: '{"item":"tea","quantity":0}'})).body)).toEqual({error: 'quantity'})
  expect(JSON.parse((await get(validator.url, {method: 'POST', body: '{"item":"tea","quantity":2}'})).body)).toEqual({item: 'tea', total: 2})
  expect(JSON.parse((await get(validator.url, {method: 'POST', body: '{"item":"tea","quantity":3}'})).body)).toEqual({item: 'tea', total: 5})

  const missing = await cli('deploy', zod, '--dry-run', '--env', 'prod')
  expect({code: missing.code, stderr: missing.stderr}).toEqual({code: 2, stderr: 'error: wrangler.jsonc has no [env.prod] section (it has staging)\n'})
})

test('bindings the host cannot provide are refused with one line and nothing is written; edgeworker.json wins over wrangler.toml', {
  timeout: 180_000,
}, async () => {
  const vectorize = project('vectorize', {
    'wrangler.toml': 'name = "vectorize"\nmain = "index.js"\ncompatibility_date = "2026-11-01"\n[[vectorize]]\nbinding = "INDEX"\nindex_name = "x"\n',
    'index.js': 'export default {fetch() { return new Response("x") }}\n',
  })
  expect((await cli('department', 'create', 'acme', 'kv', '--id', 'kv')).code).toBe(0)
  const refused = await cli('deploy', vectorize, '--department', 'kv')
  expect({code: refused.code, stdout: refused.stdout, stderr: refused.stderr}).toEqual({
    code: 2,
    stdout: '',
    stderr: 'error: wrangler.toml: vectorize is not provided by the edge host on-prem; remove it (a Worker using it would fail at its first request)\n',
  })
  const noNode = project('no-node-compat', {
    'wrangler.toml': 'name = "crypto"\nmain = "index.ts"\ncompatibility_date = "2026-11-01"\n',
    'index.ts': 'import {createHash} from "node:crypto"\nexport default {fetch() { return new Response(createHash("sha256").update("x").digest("hex")) }}\n',
  })
  const builtin = await cli('deploy', noNode, '--department', 'kv')
  expect(builtin.code).toBe(2)
  expect(builtin.stderr).toMatch(
    /^error: bundling failed: index\.ts:1:\d+: Could not resolve "node:crypto" .*\(Node\.js built-ins need compatibility_flags = \["nodejs_compat"\]\)\n$/,
  )
  expect(JSON.parse((await cli('worker', 'list', '--json')).stdout).filter((worker: {department_id: string}) => worker.department_id === 'kv')).toEqual([])

  const both = project('both', {
    'wrangler.toml': 'name = "ignored"\nmain = "nope.ts"\ncompatibility_date = "2026-11-01"\n',
    'edgeworker.json': JSON.stringify({
      name: 'both',
      main: 'index.js',
      modules: ['index.js'],
      compatibilityDate: '2026-11-01',
      builderPolicy: 'department-worker-project-v2.9',
    }),
    'index.js': 'export default {fetch() { return new Response("from edgeworker.json") }}\n',
  })
  const plan = JSON.parse((await cli('deploy', both, '--dry-run', '--json')).stdout) as {warnings: string[]; name: string}
  expect(plan).toMatchObject({name: 'both', warnings: [`edgeworker.json wins over wrangler.toml in ${both}`]})
})

test('module rules: a .wasm import and a custom Text rule stay separate modules of their types, and the Worker uses them', {timeout: 180_000}, async () => {
  const dir = project('rules', {
    'wrangler.toml': 'name = "rules"\nmain = "src/index.ts"\ncompatibility_date = "2026-11-01"\n[[rules]]\ntype = "Text"\nglobs = ["**/*.graphql"]\n',
    'src/index.ts': `import addModule from './add.wasm'
import schema from './schema.graphql'
export default {
  async fetch(): Promise<Response> {
    const instance = await WebAssembly.instantiate(addModule as WebAssembly.Module)
    const add = instance.exports.add as (a: number, b: number) => number
    return Response.json({sum: add(2, 3), schema: (schema as string).trim()})
  },
}
`,
    'src/schema.graphql': 'type Query { sum: Int }\n',
  })
  copyFileSync(path.join(FIXTURES, 'modules', 'add.wasm'), path.join(dir, 'src', 'add.wasm'))
  const plan = JSON.parse((await cli('deploy', dir, '--dry-run', '--json')).stdout) as {modules: Array<{name: string; type: string}>}
  // Named as wrangler names them: the SHA-1 of their bytes, then the file name.
  expect(plan.modules.map(({name, type}) => ({name: name.replace(/^[0-9a-f]{40}-/, '<sha1>-'), type})).sort((a, b) => a.name.localeCompare(b.name))).toEqual([
    {name: '<sha1>-add.wasm', type: 'wasm'},
    {name: '<sha1>-schema.graphql', type: 'text'},
    {name: 'index.js', type: 'esModule'},
  ])
  const {url} = await deploy(dir)
  expect(JSON.parse((await get(url)).body)).toEqual({sum: 5, schema: 'type Query { sum: Int }'})
})

test('init writes a project deploy accepts at once, for every template, and never overwrites a file', {timeout: 180_000}, async () => {
  const served: Record<string, {status: number; body: string}> = {}
  const urls: Record<string, string> = {}
  for (const template of TEMPLATES) {
    const dir = path.join(root, 'projects', `init-${template}`)
    const written = await cli('init', dir, '--template', template, '--json')
    expect(written.code).toBe(0)
    const {url} = await deploy(dir)
    const {status, body} = await get(url)
    served[template] = {status, body}
    urls[template] = url
  }
  expect(served.hello).toEqual({status: 200, body: 'Hello from init-hello! (GET /)\n'})
  expect(served['durable-object']).toEqual({status: 200, body: '{"name":"default","value":1}'})
  expect(served.websocket).toEqual({status: 200, body: 'Connect a WebSocket here; every message comes back.\n'})
  expect(served.hono).toEqual({status: 200, body: 'Hello from init-hono (Hono)!\n'})
  // The assets template: the host serves public/, the Worker /api/*, the site's 404 page the rest.
  expect(served.assets).toEqual({status: 200, body: expect.stringContaining('<title>init-assets</title>')})
  const assetsUrl = urls.assets!
  expect(await get(`${assetsUrl}api/hello`)).toMatchObject({status: 200, body: '{"message":"Hello from init-assets!","path":"/api/hello"}'})
  expect(await get(`${assetsUrl}no-such-page`)).toMatchObject({status: 404, body: expect.stringContaining('<h1>Not found</h1>')})

  const badDepartment = await cli('init', path.join(root, 'projects', 'init-bad'), '--department', 'sales dept')
  expect({code: badDepartment.code, stderr: badDepartment.stderr}).toEqual({
    code: 2,
    stderr: `error: department id "sales dept" is invalid: use 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit\n`,
  })
  expect(existsSync(path.join(root, 'projects', 'init-bad'))).toBe(false)

  const again = await cli('init', path.join(root, 'projects', 'init-hello'))
  expect({code: again.code, stderr: again.stderr}).toEqual({
    code: 2,
    stderr: `error: ${path.join(root, 'projects', 'init-hello')} already has .gitignore, wrangler.toml, src/index.ts; init never overwrites a file\n`,
  })
})

test('the entry given on the command line: deploy <entry> and --main (wrangler [script])', {timeout: 300_000}, async () => {
  // Hono's examples: no main in the config, `wrangler dev src/index.ts`.
  const noMain = project('entry-on-command-line', {'wrangler.toml': 'name = "cli-entry"\ncompatibility_date = "2026-11-01"\n', 'src/index.ts': HONO_APP})
  const missing = await cli('deploy', noMain, '--dry-run')
  expect({code: missing.code, stderr: missing.stderr}).toEqual({
    code: 2,
    stderr: 'error: wrangler.toml: key "main" is required (or give the entry module: deploy <entry> or --main)\n',
  })
  const [byEntry, byFlag] = await Promise.all([deploy(path.join(noMain, 'src', 'index.ts')), deploy(noMain, '--main', path.join(noMain, 'src', 'index.ts'))])
  expect((await get(byEntry.url)).body).toBe('Hello Hono!')
  expect((await get(`${byFlag.url}items/3`)).body).toBe('{"id":"3","typed":true}')
  const elsewhere = project('entry-elsewhere', {'wrangler.toml': 'name = "elsewhere"\ncompatibility_date = "2026-11-01"\n'})
  const outside = await cli('deploy', elsewhere, '--dry-run', '--main', path.join(noMain, 'src', 'index.ts'))
  expect({code: outside.code, stderr: outside.stderr}).toEqual({
    code: 2,
    stderr: `error: --main ${path.join(noMain, 'src', 'index.ts')} is outside the project directory ${elsewhere}\n`,
  })
})

test('a config of another file name: --wrangler-config (wrangler -c)', {timeout: 300_000}, async () => {
  const twoWorkers = project('two-configs', {
    'worker-a.wrangler.jsonc': '{"name": "worker-a", "main": "a.js", "compatibility_date": "2026-11-01" /* a comment */}',
    'worker-b.wrangler.toml': 'name = "worker-b"\nmain = "b.js"\ncompatibility_date = "2026-11-01"\n',
    'a.js': 'export default {fetch() { return new Response("a") }}\n',
    'b.js': 'export default {fetch() { return new Response("b") }}\n',
  })
  const [a, b] = await Promise.all([
    deploy(twoWorkers, '--wrangler-config', path.join(twoWorkers, 'worker-a.wrangler.jsonc')),
    deploy(twoWorkers, '--wrangler-config', path.join(twoWorkers, 'worker-b.wrangler.toml')),
  ])
  expect([(await get(a.url)).body, (await get(b.url)).body]).toEqual(['a', 'b'])
  const absent = await cli('deploy', twoWorkers, '--dry-run', '--wrangler-config', path.join(twoWorkers, 'nope.toml'))
  expect({code: absent.code, stderr: absent.stderr}).toEqual({
    code: 2,
    stderr: `error: --wrangler-config ${path.join(twoWorkers, 'nope.toml')} does not exist\n`,
  })
})

test("edgeworker.json lists one file as two modules (workerd's yazl sample embeds its own code as text)", {timeout: 180_000}, async () => {
  const code = 'import source from "worker.txt"\nexport default {fetch() { return new Response(source) }}\n'
  const dir = project('one-file-two-modules', {
    'edgeworker.json': JSON.stringify({
      name: 'self-embedding',
      main: 'worker.js',
      modules: ['worker.js', {path: 'worker.js', type: 'text', name: 'worker.txt'}],
      compatibilityDate: '2026-11-01',
      builderPolicy: 'department-worker-project-v2.9',
    }),
    'worker.js': code,
  })
  const {url} = await deploy(dir)
  expect((await get(url)).body).toBe(code)
})

test('React server rendering (process.env.NODE_ENV defined, as wrangler defines it) and object-inspect (its package.json browser field)', {
  timeout: 180_000,
}, async () => {
  const dir = project('react-ssr', {
    'wrangler.toml': 'name = "react-ssr"\nmain = "src/index.tsx"\ncompatibility_date = "2026-11-01"\n',
    'src/index.tsx': `import React from 'react'
import {renderToString} from 'react-dom/server'
import inspect from 'object-inspect'
function Page({name}: {name: string}) {
  return <h1>Hello {name}</h1>
}
export default {
  fetch(): Response {
    return new Response(renderToString(<Page name="SSR" />) + ' ' + inspect({a: [1, 'x']}))
  },
}
`,
  })
  const plan = JSON.parse((await cli('deploy', dir, '--dry-run', '--json')).stdout) as {dependencies: Record<string, string>}
  expect(plan.dependencies).toEqual({'object-inspect': '1.14.0', react: '19.3.1', 'react-dom': '19.3.1'})
  // Over the bundle limit, the refusal names the largest inputs: react-dom's server renderer first.
  const tooBig = await runCli(['deploy', dir, '--dry-run', '--data-dir', path.join(root, 'kit')], {EDGEWORKERS_DEPLOY__BUNDLE_MAX_BYTES: '100000'})
  expect({code: tooBig.code, stdout: tooBig.stdout}).toEqual({code: 2, stdout: ''})
  expect(tooBig.stderr).toMatch(
    /^error: bundle is [\d.]+ [KM]iB; the limit is 97\.7 KiB; largest inputs: \S*node_modules\/react-dom\/cjs\/react-dom-server[\w.-]*\.js \(\d+ bytes\), [^,]+, [^,]+\n$/,
  )
  const {url} = await deploy(dir)
  expect((await get(url)).body).toBe("<h1>Hello <!-- -->SSR</h1> { a: [ 1, 'x' ] }")
})
