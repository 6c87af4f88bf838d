import {randomBytes} from 'node:crypto'
import {chmodSync, mkdirSync, rmSync, symlinkSync, utimesSync} from 'node:fs'
import path from 'node:path'
import {Parser, type ReadEntry} from 'tar'
import {describe, expect, test} from 'vitest'
import {canonicalDigest, canonicalJson, sha256Hex} from '../../../src/canonical-json.js'
import {overLimitMessage} from '../../../src/artifacts/size.js'
import {KitError} from '../../../src/errors.js'
import {readProjectArchive} from '../../../src/engine/project/archive.js'
import {buildVersion, type ArtifactLimits} from '../../../src/engine/project/build.js'
import {parseBundle} from '../../../src/engine/project/bundle.js'
import {RECEIPT_KEYS} from '../../../src/engine/project/receipt.js'
import {releaseGenerationOf} from '../../../src/engine/project/release-generation.js'
import {DIGEST_NAMES} from '../../../src/engine/project/version-digests.js'
import {copyFixture, DEFAULT_LIMITS, editManifest, fixturePath, MiB, readManifest, repoPath, tempDir, writeFile} from '../../engine/project-helpers.js'

const HEX64 = /^[0-9a-f]{64}$/

/** The error a build fails with; fails the test if it succeeds. */
async function buildError(projectDir: string, limits: ArtifactLimits = DEFAULT_LIMITS): Promise<KitError> {
  const error: unknown = await buildVersion(projectDir, limits).then(
    () => undefined,
    (thrown: unknown) => thrown,
  )
  expect(error).toBeInstanceOf(KitError)
  const kitError = error as KitError
  expect(kitError.code).toBe('usage')
  expect(kitError.message).not.toContain('\n')
  return kitError
}

describe('buildVersion', () => {
  test('builds the archive, bundle, SBOM, seven digests and a receipt with exactly the receipt keys', async () => {
    const built = await buildVersion(fixturePath('basic'), DEFAULT_LIMITS)

    expect(Object.keys(built.receipt).sort()).toEqual([...RECEIPT_KEYS].sort())
    expect(Object.keys(built.receipt)).toHaveLength(12)
    expect(built.receipt.receiptVersion).toBe('1')
    expect(built.receipt.builderPolicy).toBe('department-worker-project-v2.9')
    expect(built.receipt.staticData).toEqual({greeting: 'hello', limits: {burst: 10}})
    for (const name of DIGEST_NAMES) {
      expect(built.digests[name]).toMatch(HEX64)
      expect(built.receipt[name]).toBe(built.digests[name])
    }
    expect(built.releaseGeneration).toMatch(/^[0-9a-f]{32}$/)
    expect(built.receipt.releaseGeneration).toBe(built.releaseGeneration)
    expect(releaseGenerationOf({...built.digests, builderPolicy: built.manifest.builderPolicy})).toBe(built.releaseGeneration)

    // Each digest over its documented input.
    expect(built.digests.projectDigest).toBe(sha256Hex(built.projectArchive))
    expect(built.digests.bundleDigest).toBe(sha256Hex(built.bundle))
    expect(built.digests.manifestDigest).toBe(canonicalDigest(readManifest(fixturePath('basic'))))
    expect(built.digests.dependencyDigest).toBe(canonicalDigest({'left-pad': '^1.3.0', '@acme/tiny': '2.0.0'}))
    expect(built.digests.staticDataDigest).toBe(canonicalDigest(built.receipt.staticData))
    expect(built.digests.lockDigest).toBe(canonicalDigest(built.lock))
    expect(built.digests.sbomDigest).toBe(canonicalDigest(built.sbom))
    expect(built.receipt.sbom).toEqual(built.sbom)
  })

  test('the bundle is canonical JSON holding the modules main-first, the rest sorted', async () => {
    const built = await buildVersion(fixturePath('basic'), DEFAULT_LIMITS)
    expect(built.moduleTuple).toEqual(['index.js', 'counter.mjs', 'lib/util.js'])

    const bundle = parseBundle(built.bundle)
    expect(built.bundle.toString('utf8')).toBe(
      canonicalJson({
        mainModule: 'index.js',
        compatibilityDate: '2026-11-01',
        modules: bundle.modules.map((module) => ({name: module.name, contentBase64: module.content.toString('base64')})),
        durableObjects: [{binding: 'COUNTER', className: 'Counter'}],
      }),
    )
    expect(bundle.modules.map((module) => module.name)).toEqual(built.moduleTuple)
    const archived = new Map((await readProjectArchive(built.projectArchive)).map((file) => [file.path, file.bytes]))
    for (const module of bundle.modules) expect(module.content.equals(archived.get(module.name)!)).toBe(true)
  })

  test('the SBOM lists dependencies (locked version when the lock has one) and modules with their SHA-256', async () => {
    const built = await buildVersion(fixturePath('basic'), DEFAULT_LIMITS)
    const bundle = parseBundle(built.bundle)
    expect(built.sbom).toEqual({
      bomFormat: 'CycloneDX',
      specVersion: '1.5',
      version: 1,
      metadata: {component: {type: 'application', name: 'basic'}},
      components: [
        {type: 'library', 'bom-ref': 'dependency:@acme/tiny', name: '@acme/tiny', version: '2.0.0'},
        {type: 'library', 'bom-ref': 'dependency:left-pad', name: 'left-pad', version: '1.3.0'},
        ...bundle.modules.map((module) => ({
          type: 'file',
          'bom-ref': `module:${module.name}`,
          name: module.name,
          hashes: [{alg: 'SHA-256', content: sha256Hex(module.content)}],
        })),
      ],
    })
  })

  test('the project archive holds every regular file, sorted, with fixed metadata', async () => {
    const dir = copyFixture('basic')
    writeFile(dir, 'node_modules/left-pad/index.js', 'module.exports = 1')
    writeFile(dir, '.git/HEAD', 'ref: refs/heads/main')
    symlinkSync(path.join(dir, 'index.js'), path.join(dir, 'alias.js'))
    const built = await buildVersion(dir, DEFAULT_LIMITS)

    const headers: {path: string; mode: number; mtime: number; uid: number; gid: number; type: string}[] = []
    await new Promise<void>((resolve, reject) => {
      const parser = new Parser({
        onReadEntry: (entry: ReadEntry) => {
          headers.push({
            path: entry.path,
            mode: entry.mode!,
            mtime: entry.mtime!.getTime(),
            uid: entry.uid!,
            gid: entry.gid!,
            type: entry.type,
          })
          entry.resume()
        },
      })
      parser.on('error', reject)
      parser.on('end', () => resolve())
      parser.end(built.projectArchive)
    })
    expect(headers.map((header) => header.path)).toEqual(['README.md', 'counter.mjs', 'edgeworker.json', 'edgeworker.lock.json', 'index.js', 'lib/util.js'])
    for (const header of headers) expect(header).toMatchObject({mode: 0o644, mtime: 0, uid: 0, gid: 0, type: 'File'})
  })

  test('the same project gives the same bytes, digests and release generation, wherever and whenever it lives', async () => {
    const first = await buildVersion(fixturePath('basic'), DEFAULT_LIMITS)
    const again = await buildVersion(fixturePath('basic'), DEFAULT_LIMITS)
    const copy = copyFixture('basic')
    utimesSync(path.join(copy, 'index.js'), new Date('2001-02-03'), new Date('2001-02-03'))
    chmodSync(path.join(copy, 'lib/util.js'), 0o755)
    const elsewhere = await buildVersion(copy, DEFAULT_LIMITS)

    for (const other of [again, elsewhere]) {
      expect(other.projectArchive.equals(first.projectArchive)).toBe(true)
      expect(other.bundle.equals(first.bundle)).toBe(true)
      expect(other.digests).toEqual(first.digests)
      expect(other.receipt).toEqual(first.receipt)
      expect(other.releaseGeneration).toBe(first.releaseGeneration)
    }
  })

  test('changing a module changes the bundle digest and the release generation', async () => {
    const dir = copyFixture('basic')
    const before = await buildVersion(dir, DEFAULT_LIMITS)
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the fixture's own source holds a template literal
    writeFile(dir, 'lib/util.js', 'export const greet = (name) => `hi from ${name}`\n')
    const after = await buildVersion(dir, DEFAULT_LIMITS)

    expect(after.digests.bundleDigest).not.toBe(before.digests.bundleDigest)
    expect(after.digests.projectDigest).not.toBe(before.digests.projectDigest)
    expect(after.digests.sbomDigest).not.toBe(before.digests.sbomDigest)
    expect(after.releaseGeneration).not.toBe(before.releaseGeneration)
    expect(after.digests.manifestDigest).toBe(before.digests.manifestDigest)
  })

  test('each input moves exactly the digests defined over it, and every change moves the release generation', async () => {
    const dir = copyFixture('basic')
    let previous = await buildVersion(dir, DEFAULT_LIMITS)
    const digestsChangedBy = async (change: () => void): Promise<string[]> => {
      change()
      const built = await buildVersion(dir, DEFAULT_LIMITS)
      expect(built.releaseGeneration).not.toBe(previous.releaseGeneration)
      const changed = DIGEST_NAMES.filter((name) => built.digests[name] !== previous.digests[name])
      previous = built
      return changed
    }

    expect(await digestsChangedBy(() => editManifest(dir, (m) => (m.staticData = {greeting: 'bye'})))).toEqual([
      'projectDigest',
      'manifestDigest',
      'staticDataDigest',
    ])
    expect(await digestsChangedBy(() => editManifest(dir, (m) => ((m.dependencies as Record<string, string>)['@acme/tiny'] = '2.0.1')))).toEqual([
      'projectDigest',
      'dependencyDigest',
      'manifestDigest',
      'sbomDigest',
    ])
    expect(
      await digestsChangedBy(() => writeFile(dir, 'edgeworker.lock.json', JSON.stringify({lockfileVersion: 1, packages: {'left-pad': {version: '1.3.1'}}}))),
    ).toEqual(['projectDigest', 'lockDigest', 'sbomDigest'])
  })

  test('the builder policy is part of the release generation', async () => {
    const built = await buildVersion(fixturePath('basic'), DEFAULT_LIMITS)
    expect(releaseGenerationOf({...built.digests, builderPolicy: 'department-worker-project-v2.5'})).not.toBe(built.releaseGeneration)
  })

  test('listing modules in another order changes the manifest, not the bundle', async () => {
    const dir = copyFixture('basic')
    const before = await buildVersion(dir, DEFAULT_LIMITS)
    editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', 'lib/util.js']))
    const after = await buildVersion(dir, DEFAULT_LIMITS)
    expect(after.bundle.equals(before.bundle)).toBe(true)
    expect(after.digests.manifestDigest).not.toBe(before.digests.manifestDigest)
  })

  test('a non-module file is part of the project archive but not the bundle', async () => {
    const dir = copyFixture('basic')
    const before = await buildVersion(dir, DEFAULT_LIMITS)
    writeFile(dir, 'docs/notes.txt', 'notes')
    const after = await buildVersion(dir, DEFAULT_LIMITS)
    expect(after.digests.projectDigest).not.toBe(before.digests.projectDigest)
    expect(after.digests.bundleDigest).toBe(before.digests.bundleDigest)
  })

  test('without a lock file the lock digest is the digest of null and the SBOM keeps declared versions', async () => {
    const dir = copyFixture('basic')
    rmSync(path.join(dir, 'edgeworker.lock.json'))
    const built = await buildVersion(dir, DEFAULT_LIMITS)
    expect(built.lock).toBeNull()
    expect(built.digests.lockDigest).toBe(sha256Hex('null'))
    expect(built.sbom.components).toContainEqual({type: 'library', 'bom-ref': 'dependency:left-pad', name: 'left-pad', version: '^1.3.0'})
  })

  test('the hello-v2 fixture builds', async () => {
    const built = await buildVersion(repoPath('fixtures/workers/hello-v2'), DEFAULT_LIMITS)
    expect(built.manifest.name).toBe('hello')
    expect(parseBundle(built.bundle).modules[0]!.content.toString('utf8')).toContain('version 2')
  })
})

test('a service-worker script is refused with one line saying how to write it as a module', async () => {
  const dir = tempDir()
  writeFile(
    dir,
    'edgeworker.json',
    JSON.stringify({name: 'sw', main: 'index.js', modules: ['index.js'], compatibilityDate: '2026-11-01', builderPolicy: 'department-worker-project-v2.9'}),
  )
  writeFile(dir, 'index.js', 'addEventListener("fetch", (event) => event.respondWith(new Response("hello")))\n')
  expect((await buildError(dir)).message).toBe(
    'the main module index.js is a service-worker script (addEventListener("fetch", …)); Workers here are ES modules: write export default {fetch(request, env, ctx) {…}} and read bindings from env, not from globals',
  )
})

describe('manifest errors are one usage line naming the file and the key', () => {
  const cases: {name: string; prepare: (dir: string) => void; message: RegExp}[] = [
    {
      name: 'unknown key',
      prepare: (dir) => editManifest(dir, (m) => (m.entry = 'index.js')),
      message: /^edgeworker\.json: unknown key "entry"$/,
    },
    {
      name: 'unknown nested key',
      prepare: (dir) => editManifest(dir, (m) => (m.durableObjects = [{binding: 'COUNTER', className: 'Counter', script: 'x'}])),
      message: /^edgeworker\.json: unknown key "durableObjects\[0\]\.script"$/,
    },
    {
      name: 'missing key',
      prepare: (dir) => editManifest(dir, (m) => delete m.compatibilityDate),
      message: /^edgeworker\.json: key "compatibilityDate" is required$/,
    },
    {
      name: 'wrong type',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = 'index.js')),
      message: /^edgeworker\.json: key "modules" must be an array$/,
    },
    {
      name: 'empty module list',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = [])),
      message: /^edgeworker\.json: key "modules" must list at least one module$/,
    },
    {
      name: 'a module whose type the extension does not give',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', 'lib/util.ts'])),
      message: /^edgeworker\.json: key "modules\[1\]": the type of "lib\/util\.ts" does not follow from its extension; give \{"path", "type"\}$/,
    },
    {
      name: 'an unknown module type',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', {path: 'lib/util.js', type: 'python'}])),
      message: /^edgeworker\.json: key "modules\[1\]\.type" must be "esModule" or "commonJs" or "text" or "json" or "data" or "wasm" or "sourceMap"$/,
    },
    {
      name: 'a main module that is not an ES module',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = [{path: 'index.js', type: 'commonJs'}, 'counter.mjs', 'lib/util.js'])),
      message: /^edgeworker\.json: key "main": "index\.js" is a commonJs module; the main module must be an ES module$/,
    },
    {
      name: 'two modules under one name',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', {path: 'lib/util.js', name: 'counter.mjs'}])),
      message: /^edgeworker\.json: key "modules" names two modules "counter\.mjs"$/,
    },
    {
      name: 'a module name that is not a specifier',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', {path: 'lib/util.js', name: '../util'}])),
      message: /^edgeworker\.json: key "modules\[2\]\.name": module name "\.\.\/util" must be letters, digits/,
    },
    {
      name: 'bad compatibility date',
      prepare: (dir) => editManifest(dir, (m) => (m.compatibilityDate = '2026-02-30')),
      message: /^edgeworker\.json: key "compatibilityDate" must be a date written YYYY-MM-DD$/,
    },
    {
      name: 'static data that is not an object',
      prepare: (dir) => editManifest(dir, (m) => (m.staticData = [1, 2])),
      message: /^edgeworker\.json: key "staticData" must be an object$/,
    },
    {
      name: 'bad durable object class name',
      prepare: (dir) => editManifest(dir, (m) => (m.durableObjects = [{binding: 'COUNTER', className: 'my-counter'}])),
      message: /^edgeworker\.json: key "durableObjects\[0\]\.className" must be a JavaScript identifier$/,
    },
    {
      name: 'duplicate durable object binding',
      prepare: (dir) =>
        editManifest(
          dir,
          (m) =>
            (m.durableObjects = [
              {binding: 'C', className: 'A'},
              {binding: 'C', className: 'B'},
            ]),
        ),
      message: /^edgeworker\.json: key "durableObjects" binds "C" more than once$/,
    },
    {
      name: 'bad dependency name',
      prepare: (dir) => editManifest(dir, (m) => (m.dependencies = {'Left Pad': '1.0.0'})),
      message: /^edgeworker\.json: key "dependencies\.Left Pad" must be a package name$/,
    },
    {
      name: 'manifest that is not an object',
      prepare: (dir) => writeFile(dir, 'edgeworker.json', '[]'),
      message: /^edgeworker\.json: must be a JSON object$/,
    },
    {
      name: 'malformed builder policy',
      prepare: (dir) => editManifest(dir, (m) => (m.builderPolicy = 'v2.9')),
      message:
        /^edgeworker\.json: key "builderPolicy": unknown builder policy "v2\.9"; known policies are department-worker-project-v2\.0 through department-worker-project-v2\.9$/,
    },
    {
      name: 'builder policy newer than the kit knows',
      prepare: (dir) => editManifest(dir, (m) => (m.builderPolicy = 'department-worker-project-v2.10')),
      message: /^edgeworker\.json: key "builderPolicy": unknown builder policy "department-worker-project-v2\.10"/,
    },
    {
      name: 'main not among the modules',
      prepare: (dir) => editManifest(dir, (m) => (m.main = 'worker.js')),
      message: /^edgeworker\.json: key "main" \("worker\.js"\) is not listed in "modules"$/,
    },
    {
      name: 'source map named after no JavaScript module',
      prepare: (dir) => {
        writeFile(dir, 'orphan.js.map', '{"version":3,"sources":[],"mappings":""}')
        return editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', 'lib/util.js', 'orphan.js.map']))
      },
      message: /^edgeworker\.json: key "modules": source map "orphan\.js\.map" must be named after a JavaScript module plus "\.map"$/,
    },
    {
      name: 'duplicate module',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', 'lib/util.js', 'index.js'])),
      message: /^edgeworker\.json: key "modules" names two modules "index\.js"$/,
    },
    {
      name: 'main listed as two ES modules',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', 'lib/util.js', {path: 'index.js', name: 'again.js'}])),
      message: /^edgeworker\.json: key "main": "index\.js" is listed as more than one ES module; list it once as an ES module$/,
    },
    {
      name: 'absolute module path',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', 'lib/util.js', '/etc/passwd.js'])),
      message: /^edgeworker\.json: key "modules\[3\]": module path "\/etc\/passwd\.js" escapes the project directory$/,
    },
    {
      name: 'dot-dot inside a module path',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', 'lib/../../x.js'])),
      message: /^edgeworker\.json: key "modules\[2\]": module path "lib\/\.\.\/\.\.\/x\.js" escapes the project directory$/,
    },
    {
      name: 'module path not normalized',
      prepare: (dir) => editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', './lib/util.js'])),
      message: /^edgeworker\.json: key "modules\[2\]": module path "\.\/lib\/util\.js" is not a normalized relative path \(write "lib\/util\.js"\)$/,
    },
    {
      name: 'missing module file',
      prepare: (dir) => rmSync(path.join(dir, 'lib/util.js')),
      message: /^edgeworker\.json: module "lib\/util\.js" does not exist in \//,
    },
    {
      name: 'module that symlinks out of the project',
      prepare: (dir) => {
        const outside = path.join(path.dirname(dir), 'outside.js')
        writeFile(path.dirname(dir), 'outside.js', 'export const x = 1')
        rmSync(path.join(dir, 'lib/util.js'))
        symlinkSync(outside, path.join(dir, 'lib/util.js'))
      },
      message: /^edgeworker\.json: module "lib\/util\.js" escapes the project directory through a symlink \(to \/.*outside\.js\)$/,
    },
    {
      name: 'module under a directory that symlinks out of the project',
      prepare: (dir) => {
        const outside = path.join(path.dirname(dir), 'elsewhere')
        mkdirSync(outside)
        writeFile(outside, 'util.js', 'export const x = 1')
        rmSync(path.join(dir, 'lib'), {recursive: true})
        symlinkSync(outside, path.join(dir, 'lib'))
      },
      message: /^edgeworker\.json: module "lib\/util\.js" escapes the project directory through a symlink/,
    },
    {
      name: 'module reached through a symlink inside the project',
      prepare: (dir) => {
        rmSync(path.join(dir, 'lib/util.js'))
        symlinkSync(path.join(dir, 'index.js'), path.join(dir, 'lib/util.js'))
      },
      message: /^edgeworker\.json: module "lib\/util\.js" is reached through a symlink; modules must be regular files$/,
    },
    {
      name: 'module in an excluded directory',
      prepare: (dir) => {
        writeFile(dir, 'node_modules/x/index.js', 'export default 1')
        editManifest(dir, (m) => (m.modules = ['index.js', 'counter.mjs', 'lib/util.js', 'node_modules/x/index.js']))
      },
      message: /^edgeworker\.json: module "node_modules\/x\/index\.js" is inside an excluded directory \(\.git, node_modules\)$/,
    },
    {
      name: 'malformed lock file',
      prepare: (dir) => writeFile(dir, 'edgeworker.lock.json', JSON.stringify({lockfileVersion: 2, packages: {}})),
      message: /^edgeworker\.lock\.json: key "lockfileVersion" must be 1$/,
    },
    {
      name: 'lock file that is not JSON',
      prepare: (dir) => writeFile(dir, 'edgeworker.lock.json', '{'),
      message: /^edgeworker\.lock\.json is not valid JSON: /,
    },
  ]

  test.each(cases)('$name', async ({prepare, message}) => {
    const dir = copyFixture('basic')
    prepare(dir)
    expect((await buildError(dir)).message).toMatch(message)
  })

  test('no manifest', async () => {
    const dir = tempDir()
    writeFile(dir, 'index.js', 'export default {}')
    expect((await buildError(dir)).message).toBe(`no edgeworker.json in ${dir}`)
  })

  test('malformed manifest (fixture)', async () => {
    expect((await buildError(fixturePath('malformed-manifest'))).message).toMatch(/^edgeworker\.json is not valid JSON: /)
  })

  test('module path escaping the project (fixture)', async () => {
    expect((await buildError(fixturePath('escaping-path'))).message).toBe(
      'edgeworker.json: key "modules[1]": module path "../outside.js" escapes the project directory',
    )
  })

  test('unknown builder policy (fixture)', async () => {
    expect((await buildError(fixturePath('unknown-policy'))).message).toBe(
      'edgeworker.json: key "builderPolicy": unknown builder policy "department-worker-project-v3.0"; ' +
        'known policies are department-worker-project-v2.0 through department-worker-project-v2.9',
    )
  })

  test('project directory that does not exist or is a file', async () => {
    const dir = tempDir()
    expect((await buildError(path.join(dir, 'nope'))).message).toBe(`project directory ${path.join(dir, 'nope')} does not exist`)
    writeFile(dir, 'file.txt', 'x')
    expect((await buildError(path.join(dir, 'file.txt'))).message).toBe(`project directory ${path.join(dir, 'file.txt')} is not a directory`)
  })
})

describe('size limits', () => {
  test('a project archive over the default 2 MiB is refused', async () => {
    const dir = copyFixture('basic')
    writeFile(dir, 'assets/noise.bin', randomBytes(Math.round(2.3 * MiB))) // random bytes do not compress
    expect((await buildError(dir)).message).toBe('project archive is 2.3 MiB; the limit is 2 MiB')
  })

  test('a bundle over the default 5 MiB is refused', async () => {
    const dir = copyFixture('basic')
    // 4 MiB of module text grows by a third as base64.
    writeFile(dir, 'lib/util.js', `export const greet = () => '${randomBytes(2 * MiB).toString('hex')}'\n`)
    const error = await buildError(dir, {...DEFAULT_LIMITS, project_archive_max_bytes: 64 * MiB})
    expect(error.message).toBe('bundle is 5.3 MiB; the limit is 5 MiB')
  })

  test('configured limits apply, and a build exactly at the limit passes', async () => {
    const built = await buildVersion(fixturePath('basic'), DEFAULT_LIMITS)
    const exact: ArtifactLimits = {
      project_archive_max_bytes: built.projectArchive.length,
      bundle_max_bytes: built.bundle.length,
      project_files_max_bytes: DEFAULT_LIMITS.project_files_max_bytes,
      assets_max_files: DEFAULT_LIMITS.assets_max_files,
      asset_max_bytes: DEFAULT_LIMITS.asset_max_bytes,
    }
    await expect(buildVersion(fixturePath('basic'), exact)).resolves.toBeDefined()
    const error = await buildError(fixturePath('basic'), {...exact, bundle_max_bytes: built.bundle.length - 1})
    expect(error.message).toBe(`bundle is ${built.bundle.length} bytes; the limit is ${built.bundle.length - 1} bytes`)
  })

  test('the size line falls back to exact bytes when rounding would hide the difference', () => {
    expect(overLimitMessage('bundle', 5 * MiB + 10, 5 * MiB)).toBe('bundle is 5242890 bytes; the limit is 5242880 bytes')
    expect(overLimitMessage('bundle', 3 * 1024, 2 * 1024)).toBe('bundle is 3 KiB; the limit is 2 KiB')
  })
})
