// Worker fixtures (fixtures/workers/<name>: edgeworker.json + ES modules) turned into edge host
// upload bodies, plus script names and ad-hoc Workers for tests.
import {createHash} from 'node:crypto'
import {cpSync, readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import type {ScriptUpload} from '../../src/edge-host/state/host-state.js'
import type {UploadScript} from '../../src/protocol/management-api.js'

export const FIXTURES_DIR = fileURLToPath(new URL('../../fixtures/workers/', import.meta.url))

interface FixtureManifest {
  name: string
  main: string
  modules: string[]
  compatibilityDate: string
  builderPolicy: string
  durableObjects?: Array<{binding: string; className: string}>
}

/** A valid script name derived from any label: `dw-` + the first 48 hex of its SHA-256. */
export function scriptNameFor(label: string): string {
  return `dw-${createHash('sha256').update(label).digest('hex').slice(0, 48)}`
}

/**
 * The upload body for a fixture (a name under fixtures/workers, or an absolute project dir). The
 * release generation defaults to a digest of the body, so different code gets a different one.
 */
export function fixtureUpload(fixture: string, overrides: Partial<UploadScript> = {}): UploadScript {
  const dir = path.isAbsolute(fixture) ? fixture : path.join(FIXTURES_DIR, fixture)
  const manifest = JSON.parse(readFileSync(path.join(dir, 'edgeworker.json'), 'utf8')) as FixtureManifest
  return withGeneration({
    mainModule: manifest.main,
    compatibilityDate: manifest.compatibilityDate,
    builderPolicy: manifest.builderPolicy,
    tags: [`fixture:${path.basename(dir)}`],
    modules: manifest.modules.map((name) => ({name, type: 'esModule', contentBase64: readFileSync(path.join(dir, name)).toString('base64')})),
    bindings: (manifest.durableObjects ?? []).map((object) => ({type: 'durable_object_namespace', name: object.binding, className: object.className})),
    ...overrides,
  })
}

/** An upload of one inline ES module, e.g. `export default {fetch() {return new Response('x')}}`. */
export function moduleUpload(source: string, overrides: Partial<UploadScript> = {}): UploadScript {
  return withGeneration({
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    builderPolicy: 'department-worker-project-v2.9',
    modules: [{name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')}],
    ...overrides,
  })
}

/** A Worker answering every request with `text`. */
export function textWorker(text: string, overrides: Partial<UploadScript> = {}): UploadScript {
  return moduleUpload(`export default { fetch() { return new Response(${JSON.stringify(text)}) } }`, overrides)
}

function withGeneration(upload: Omit<UploadScript, 'releaseGeneration'> & {releaseGeneration?: string}): UploadScript {
  const releaseGeneration = upload.releaseGeneration ?? createHash('sha256').update(JSON.stringify(upload)).digest('hex').slice(0, 32)
  return {...upload, releaseGeneration}
}

/**
 * Copies fixtures/workers/oversize to `targetDir` and writes its padding.js there: a 5.5 MiB string
 * constant, over the 5 MiB limit (not committed to keep the repository small).
 */
export function materializeOversizeFixture(targetDir: string, paddingBytes = 5.5 * 1024 * 1024): string {
  cpSync(path.join(FIXTURES_DIR, 'oversize'), targetDir, {recursive: true})
  writeFileSync(path.join(targetDir, 'padding.js'), `export const padding = '${'x'.repeat(paddingBytes)}'\n`)
  return targetDir
}

/** A one-module release as the host state takes it (HostState.scripts.put): `source` is index.js; its release generation derives from `key`. */
export function stateUpload(key: string, source: string, overrides: Partial<ScriptUpload> = {}): ScriptUpload {
  return {
    releaseGeneration: createHash('sha256').update(key).digest('hex').slice(0, 16),
    mainModule: 'index.js',
    compatibilityDate: '2025-01-01',
    compatibilityFlags: [],
    builderPolicy: 'test',
    tags: [],
    department: null,
    modules: [{name: 'index.js', type: 'esModule', content: Buffer.from(source)}],
    bindings: [],
    crons: [],
    queueConsumers: [],
    assets: null,
    versionIds: [],
    split: null,
    ...overrides,
  }
}
