// Wrangler projects build as wrangler builds them: each project below is deployed through the CLI to
// a real edge host, and what it serves is compared with what wrangler's own build of the same project
// serves (wrangler 4.86 from npm, offline, run in miniflare: ../support/wrangler-oracle.ts) — Node.js
// polyfills under nodejs_compat (unenv, as wrangler's preset has them), nodejs_als, a .wasm file from
// inside an npm package, find_additional_modules and no_bundle's module rules; a service-worker
// script, which wrangler builds and the kit refuses in one line.
import {copyFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {request} from 'undici'
import {expect, test} from 'vitest'
import {wranglerProjectsWorkspace} from '../support/wrangler-projects.js'
import {expectDeployRefusals} from '../support/cli.js'
import {wranglerServes} from '../support/wrangler-oracle.js'

const FIXTURES = fileURLToPath(new URL('../../fixtures/workers', import.meta.url))
const PACKAGES = {pg: '8.23.1', 'blake3-wasm': '2.1.5'}
const {cli, project, nextDepartment} = wranglerProjectsWorkspace('wrangler-parity', PACKAGES)

interface Plan {
  modules: Array<{name: string; type: string}>
  dependencies?: Record<string, string>
}

/** Deploys `dir` through the CLI; returns the dry run's plan and what the Worker answers to GET of each path. */
async function kitServes(dir: string, paths: string[]): Promise<{plan: Plan; answers: Array<{status: number; body: string}>}> {
  const dryRun = await cli('deploy', dir, '--dry-run', '--json')
  expect({code: dryRun.code, stderr: dryRun.stderr}).toEqual({code: 0, stderr: ''})
  const department = nextDepartment()
  expect((await cli('department', 'create', 'acme', department, '--id', department)).code).toBe(0)
  const result = await cli('deploy', dir, '--department', department, '--json')
  expect({code: result.code, stderr: result.stderr}).toEqual({code: 0, stderr: expect.not.stringContaining('"level":40')})
  const {state, url} = JSON.parse(result.stdout) as {state: string; url: string}
  expect(state).toBe('completed')
  const answers: Array<{status: number; body: string}> = []
  for (const pathname of paths) {
    const response = await request(new URL(pathname.slice(1), url))
    answers.push({status: response.statusCode, body: await response.body.text()})
  }
  return {plan: JSON.parse(dryRun.stdout) as Plan, answers}
}

/** The kit's build and wrangler's serve the same answers; returns the kit's plan and answers. */
async function servesAsWrangler(dir: string, paths: string[]) {
  const ours = await kitServes(dir, paths)
  expect(ours.answers).toEqual(await wranglerServes(dir, paths))
  return ours
}

const json = (answers: Array<{status: number; body: string}>) => answers.map(({status, body}) => [status, JSON.parse(body) as unknown])

test('nodejs_compat: a CommonJS require("events") in the project and in pg, process and node:os polyfilled at a 2024 compatibility date', {
  timeout: 240_000,
}, async () => {
  const cjs = project('require-events', {
    'wrangler.toml': 'name = "require-events"\nmain = "src/index.js"\ncompatibility_date = "2026-04-01"\ncompatibility_flags = ["nodejs_compat"]\n',
    'src/emitter.cjs': `const EventEmitter = require("events")\nconst emitter = new EventEmitter()\nlet heard = null\nemitter.on("ping", (value) => { heard = value })\nemitter.emit("ping", 42)\nmodule.exports = {heard: () => heard, EventEmitter}\n`,
    'src/index.js': `import pg from "pg"
import emitter from "./emitter.cjs"
export default {
  fetch() {
    const client = new pg.Client({connectionString: "postgres://u:p@db.invalid:5432/app"})
    return Response.json({heard: emitter.heard(), clientIsEmitter: client instanceof emitter.EventEmitter, database: client.database})
  },
}
`,
  })
  const {plan, answers} = await servesAsWrangler(cjs, ['/'])
  expect(json(answers)).toEqual([[200, {heard: 42, clientIsEmitter: true, database: 'app'}]])
  expect(plan.dependencies).toMatchObject({pg: PACKAGES.pg})

  const older = project('node-os-2024', {
    'wrangler.toml': 'name = "node-os"\nmain = "src/index.ts"\ncompatibility_date = "2024-10-11"\ncompatibility_flags = ["nodejs_compat"]\n',
    'src/index.ts': `import os from "node:os"
import {EventEmitter} from "node:events"
export default {
  fetch(): Response {
    return Response.json({
      platform: os.platform(),
      eol: os.EOL,
      processGlobal: typeof process,
      nextTick: typeof process.nextTick,
      nodeEnv: process.env.NODE_ENV,
      emitter: typeof new EventEmitter().on,
    })
  },
}
`,
  })
  const polyfilled = await servesAsWrangler(older, ['/'])
  expect(json(polyfilled.answers)).toEqual([
    [200, {platform: 'linux', eol: '\n', processGlobal: 'object', nextTick: 'function', nodeEnv: 'production', emitter: 'function'}],
  ])
  // The polyfills come from Cloudflare's unenv preset, which the SBOM names with the versions wrangler 4.86 uses.
  expect(polyfilled.plan.dependencies).toEqual({'@cloudflare/unenv-preset': '2.16.1', unenv: '2.0.0-rc.24'})
})

test('nodejs_als alone: node:async_hooks bundles, and AsyncLocalStorage carries the value', {timeout: 180_000}, async () => {
  const dir = project('als-only', {
    'wrangler.toml': 'name = "als"\nmain = "src/index.ts"\ncompatibility_date = "2026-04-01"\ncompatibility_flags = ["nodejs_als"]\n',
    'src/index.ts': `import {AsyncLocalStorage} from "node:async_hooks"
const storage = new AsyncLocalStorage<string>()
export default {
  async fetch(): Promise<Response> {
    const seen = await storage.run("request-1", async () => {
      await new Promise((resolve) => setTimeout(resolve, 1))
      return storage.getStore()
    })
    return Response.json({seen, outside: storage.getStore() ?? null})
  },
}
`,
  })
  const {answers} = await servesAsWrangler(dir, ['/'])
  expect(json(answers)).toEqual([[200, {seen: 'request-1', outside: null}]])
})

test('a .wasm file from inside an npm package stays a wasm module, named as wrangler names it', {timeout: 180_000}, async () => {
  const dir = project('package-wasm', {
    'wrangler.toml': 'name = "package-wasm"\nmain = "src/index.ts"\ncompatibility_date = "2026-04-01"\n',
    'src/index.ts': `import blake3 from "blake3-wasm/dist/wasm/web/blake3_js_bg.wasm"
import add from "./add.wasm"
export default {
  async fetch(): Promise<Response> {
    const exports = WebAssembly.Module.exports(blake3 as WebAssembly.Module).map((entry) => entry.name).sort()
    const instance = await WebAssembly.instantiate(add as WebAssembly.Module)
    return Response.json({blake3: exports.filter((name) => name.startsWith("hash")), sum: (instance.exports.add as (a: number, b: number) => number)(2, 3)})
  },
}
`,
  })
  copyFileSync(path.join(FIXTURES, 'modules', 'add.wasm'), path.join(dir, 'src', 'add.wasm'))
  const {plan, answers} = await servesAsWrangler(dir, ['/'])
  expect(json(answers)).toEqual([[200, {blake3: expect.arrayContaining(['hash', 'hashreader_fill']), sum: 5}]])
  const [main, ...attached] = plan.modules
  expect(main).toMatchObject({name: 'index.js', type: 'esModule'})
  expect(attached.map(({name, type}) => [name.replace(/^[0-9a-f]{40}-/, '<sha1>-'), type]).sort()).toEqual([
    ['<sha1>-add.wasm', 'wasm'],
    ['<sha1>-blake3_js_bg.wasm', 'wasm'],
  ])
})

test('find_additional_modules when bundling (a dynamic import by computed path), and no_bundle taking data.bin by the default rules and label.js by a rule of the project', {
  timeout: 240_000,
}, async () => {
  const found = project('find-additional', {
    'wrangler.toml':
      'name = "lang"\nmain = "src/index.ts"\ncompatibility_date = "2026-04-01"\nfind_additional_modules = true\n[[rules]]\ntype = "ESModule"\nglobs = ["lang/*.js"]\n',
    'src/index.ts': `export default {
  async fetch(request: Request): Promise<Response> {
    const code = new URL(request.url).searchParams.get("lang") ?? "en"
    const {greeting} = await import("./lang/" + code + ".js")
    return new Response(greeting)
  },
}
`,
    'src/lang/en.js': 'export const greeting = "hello"\n',
    'src/lang/fr.js': 'export const greeting = "bonjour"\n',
  })
  const lang = await servesAsWrangler(found, ['/?lang=en', '/?lang=fr'])
  expect(lang.answers).toEqual([
    {status: 200, body: 'hello'},
    {status: 200, body: 'bonjour'},
  ])
  expect(lang.plan.modules.map(({name, type}) => ({name, type}))).toEqual([
    {name: 'index.js', type: 'esModule'},
    {name: 'lang/en.js', type: 'esModule'},
    {name: 'lang/fr.js', type: 'esModule'},
  ])

  const unbundled = project('no-bundle-data', {
    'wrangler.toml':
      'name = "data"\nmain = "src/index.js"\ncompatibility_date = "2026-04-01"\nno_bundle = true\n[[rules]]\ntype = "ESModule"\nglobs = ["**/*.js"]\n',
    'src/index.js': `import data from "./data.bin"\nimport {label} from "./label.js"\nexport default {fetch() { return Response.json({label, bytes: [...new Uint8Array(data)]}) }}\n`,
    'src/label.js': 'export const label = "raw"\n',
    'src/data.bin': Buffer.from([1, 2, 250]),
  })
  const data = await servesAsWrangler(unbundled, ['/'])
  expect(json(data.answers)).toEqual([[200, {label: 'raw', bytes: [1, 2, 250]}]])
  expect(data.plan.modules.map(({name, type}) => ({name, type}))).toEqual([
    {name: 'index.js', type: 'esModule'},
    {name: 'data.bin', type: 'data'},
    {name: 'label.js', type: 'esModule'},
  ])
})

test('service-worker syntax: wrangler builds it as a service-worker script, and the kit refuses it at build with one line saying how to convert', {
  timeout: 180_000,
}, async () => {
  const dir = project('service-worker', {
    'wrangler.toml': 'name = "sw"\nmain = "src/index.js"\ncompatibility_date = "2026-04-01"\n',
    'src/index.js': 'addEventListener("fetch", (event) => event.respondWith(new Response("hello from " + new URL(event.request.url).pathname)))\n',
  })
  // workerd runs it (wrangler's build answers), but the host's Worker Loader loads only ES modules.
  expect(await wranglerServes(dir, ['/a'])).toEqual([{status: 200, body: 'hello from /a'}])
  const department = nextDepartment()
  expect((await cli('department', 'create', 'acme', department, '--id', department)).code).toBe(0)
  await expectDeployRefusals(cli, department, [
    {
      name: 'service-worker',
      dir,
      message:
        'the main module index.js is a service-worker script (addEventListener("fetch", …)); Workers here are ES modules: write export default {fetch(request, env, ctx) {…}} and read bindings from env, not from globals',
    },
  ])
})
