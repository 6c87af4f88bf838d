// A build takes nothing from outside the project directory and nothing the host would refuse
// (issue #29, hole 6), the same for wrangler projects as for edgeworker.json projects: a main, an
// import or a text module reached by a relative or absolute path or through a symlink out of the
// project; more modules than the host accepts; a module that is not valid UTF-8. Each is one line,
// exit 2, and nothing written. npm packages resolved from the project stay allowed wherever they
// are installed (a monorepo's hoisted node_modules, a workspace symlink).
import {generateKeyPairSync} from 'node:crypto'
import {mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {fingerprintOf, kitScopeFor} from '../../src/protocol/signing.js'
import {openStore} from '../../src/store/index.js'
import {runCli} from '../support/cli.js'

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-containment-'))
const dataDir = path.join(root, 'data')
const outside = path.join(root, 'outside')
const department = 'dept-containment'
const WRANGLER = 'name = "contained"\nmain = "src/index.js"\ncompatibility_date = "2026-11-01"\n'
const HELLO = 'export default {fetch() { return new Response("hello") }}\n'

beforeAll(async () => {
  const settings = settingsSchema.parse({data_dir: dataDir})
  const store = await openStore(settings)
  await store.migrate()
  // A recorded pairing with no host behind it: every refusal below happens at build.
  const publicKey = `${(generateKeyPairSync('ed25519').publicKey.export({format: 'jwk'}).x as string).replace(/-/g, '+').replace(/_/g, '/')}=`
  await store.kit.savePairing({
    scope: kitScopeFor(publicKey),
    host_url: 'http://127.0.0.1:9',
    host_fingerprint: fingerprintOf(publicKey),
    host_public_key: publicKey,
    shared_secret: 'a'.repeat(64),
  })
  await store.tenants.createCompany({id: 'acme', name: 'Acme'})
  await store.tenants.createDepartment({id: department, company_id: 'acme', name: 'Sales'})
  await store.close()
  write(outside, {'evil.js': 'export default "the operator\'s file"\n', 'creds.json': '{"password": "hunter2"}\n', 'notes.txt': 'private\n'})
}, 60_000)
afterAll(() => rmSync(root, {recursive: true, force: true}))

function write(dir: string, files: Record<string, string | Buffer>): string {
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), {recursive: true})
    writeFileSync(path.join(dir, file), content)
  }
  return dir
}

let projects = 0
function project(files: Record<string, string | Buffer>): string {
  return write(path.join(root, 'projects', `p${++projects}`), files)
}

function nothingWritten(): void {
  const db = new Database(path.join(dataDir, 'edgeworkers.sqlite'), {readonly: true})
  try {
    for (const table of ['edge_workers', 'edge_worker_versions', 'edge_worker_outbox']) {
      expect((db.prepare(`select count(*) as n from ${table}`).get() as {n: number}).n, table).toBe(0)
    }
  } finally {
    db.close()
  }
  const artifacts = path.join(dataDir, 'artifacts')
  expect(readdirSync(artifacts, {recursive: true, withFileTypes: true}).filter((entry) => entry.isFile())).toEqual([])
}

/** Deploys `dir` for real (no --dry-run): the build must refuse it with one line, exit 2, nothing written. */
async function refused(dir: string): Promise<string> {
  const result = await runCli(['deploy', dir, '--department', department, '--no-wait', '--data-dir', dataDir])
  expect({code: result.code, stdout: result.stdout, lines: result.stderr.trimEnd().split('\n').length}).toEqual({code: 2, stdout: '', lines: 1})
  nothingWritten()
  return result.stderr.trimEnd()
}

describe('a wrangler project takes nothing from outside its directory', () => {
  test('main outside the project, directly or through a symlink', {timeout: 60_000}, async () => {
    const direct = project({'wrangler.toml': WRANGLER.replace('src/index.js', '../../outside/evil.js')})
    expect(await refused(direct)).toBe(`error: wrangler.toml: main ../../outside/evil.js is outside the project directory ${direct}`)
    const linked = project({'wrangler.toml': WRANGLER})
    mkdirSync(path.join(linked, 'src'))
    symlinkSync(path.join(outside, 'evil.js'), path.join(linked, 'src', 'index.js'))
    expect(await refused(linked)).toBe(
      `error: wrangler.toml: main src/index.js escapes the project directory through a symlink (to ${path.join(outside, 'evil.js')})`,
    )
  })

  test('an import by relative path, by absolute path, or through a symlink', {timeout: 60_000}, async () => {
    const cases: Array<[string, string]> = [
      ['../../../outside/evil.js', 'import secret from "../../../outside/evil.js"'],
      [path.join(outside, 'creds.json'), `import secret from ${JSON.stringify(path.join(outside, 'creds.json'))}`],
      ['./linked.js', 'import secret from "./linked.js"'],
    ]
    for (const [specifier, importLine] of cases) {
      const dir = project({'wrangler.toml': WRANGLER, 'src/index.js': `${importLine}\nexport default {fetch() { return Response.json(secret) }}\n`})
      symlinkSync(path.join(outside, 'evil.js'), path.join(dir, 'src', 'linked.js'))
      const target = specifier.endsWith('creds.json') ? path.join(outside, 'creds.json') : path.join(outside, 'evil.js')
      expect(await refused(dir)).toBe(
        `error: bundling refused: src/index.js imports ${JSON.stringify(specifier)}, which is ${target}, outside the project directory ${dir}; a bundle takes only the project's own files and npm packages`,
      )
    }
  })

  test('a text module through a symlink, and a base_dir outside the project', {timeout: 60_000}, async () => {
    const text = project({
      'wrangler.toml': WRANGLER,
      'src/index.js': 'import notes from "./notes.txt"\nexport default {fetch() { return new Response(notes) }}\n',
    })
    symlinkSync(path.join(outside, 'notes.txt'), path.join(text, 'src', 'notes.txt'))
    expect(await refused(text)).toMatch(
      /^error: bundling failed: src\/index\.js:1:\d+: \.\/notes\.txt escapes the project directory through a symlink \(to .*\/outside\/notes\.txt\)$/,
    )
    const baseDir = project({'wrangler.toml': `${WRANGLER}base_dir = "../.."\n`, 'src/index.js': HELLO})
    expect(await refused(baseDir)).toBe(`error: wrangler.toml: base_dir ../.. is outside the project directory ${baseDir}`)
  })

  test('npm packages resolve wherever module resolution finds them: a hoisted node_modules, a workspace symlink', {timeout: 60_000}, async () => {
    write(path.join(root, 'projects', 'node_modules', 'hoisted-greeting'), {
      'package.json': JSON.stringify({name: 'hoisted-greeting', version: '1.2.3', type: 'module', exports: './lib/index.js'}),
      'lib/index.js': 'export {greeting} from "./words.js"\n',
      'lib/words.js': 'export const greeting = "hoisted"\n',
    })
    write(path.join(root, 'packages', 'shared'), {
      'package.json': JSON.stringify({name: '@acme/shared', version: '0.0.1', type: 'module', main: 'index.js'}),
      'index.js': 'export const shared = "workspace"\n',
    })
    const dir = project({
      'wrangler.toml': WRANGLER,
      'src/index.js': `import {greeting} from "hoisted-greeting"\nimport {shared} from "@acme/shared"\nexport default {fetch() { return new Response(greeting + " " + shared) }}\n`,
    })
    mkdirSync(path.join(dir, 'node_modules', '@acme'), {recursive: true})
    symlinkSync(path.join(root, 'packages', 'shared'), path.join(dir, 'node_modules', '@acme', 'shared'))
    const plan = await runCli(['deploy', dir, '--dry-run', '--json', '--data-dir', dataDir])
    expect({code: plan.code, stderr: plan.stderr}).toEqual({code: 0, stderr: ''})
    expect(JSON.parse(plan.stdout)).toMatchObject({dependencies: {'hoisted-greeting': '1.2.3'}})
  })
})

describe('the host limits and UTF-8, checked at build for both kinds of project', () => {
  const manyModules = Object.fromEntries(Array.from({length: 1000}, (_, index) => [`src/part${index}.txt`, `${index}\n`]))

  test('more modules than the host accepts', {timeout: 60_000}, async () => {
    const wrangler = project({'wrangler.toml': `${WRANGLER}no_bundle = true\nfind_additional_modules = true\n`, 'src/index.js': HELLO, ...manyModules})
    expect(await refused(wrangler)).toBe('error: wrangler.toml: the build gives 1001 modules; the edge host accepts at most 1000 per Worker')
    const modules = ['src/index.js', ...Object.keys(manyModules)]
    const manifest = {name: 'many', main: 'src/index.js', modules, compatibilityDate: '2026-11-01', builderPolicy: 'department-worker-project-v2.9'}
    const edgeworker = project({'edgeworker.json': JSON.stringify(manifest), 'src/index.js': HELLO, ...manyModules})
    expect(await refused(edgeworker)).toBe('error: edgeworker.json: key "modules" lists 1001 modules; the edge host accepts at most 1000 per Worker')
  })

  test('a JavaScript module that is not valid UTF-8', {timeout: 60_000}, async () => {
    const latin1 = Buffer.concat([Buffer.from('export default {fetch() { return new Response("caf'), Buffer.from([0xe9]), Buffer.from('") }}\n')])
    const bundled = project({
      'wrangler.toml': WRANGLER,
      'src/index.js': 'import handler from "./handler.ts"\nexport default handler\n',
      'src/handler.ts': latin1,
    })
    expect(await refused(bundled)).toBe(
      'error: bundling refused: src/handler.ts is not valid UTF-8 (at byte offset 50); workerd would read it with replacement characters',
    )
    const unbundled = project({'wrangler.toml': `${WRANGLER}no_bundle = true\n`, 'src/index.js': latin1})
    expect(await refused(unbundled)).toBe(
      'error: wrangler.toml: index.js is not valid UTF-8 (at byte offset 50); workerd would read it with replacement characters',
    )
    const manifest = {name: 'latin1', main: 'index.js', modules: ['index.js'], compatibilityDate: '2026-11-01', builderPolicy: 'department-worker-project-v2.9'}
    const edgeworker = project({'edgeworker.json': JSON.stringify(manifest), 'index.js': latin1})
    expect(await refused(edgeworker)).toBe(
      'error: edgeworker.json: module "index.js" is not valid UTF-8 (at byte offset 50); workerd would read it with replacement characters',
    )
  })
})
