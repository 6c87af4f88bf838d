// Workers for benchmarks: the fixtures (fixtures/workers/<name>: edgeworker.json + ES modules) as
// edge host upload bodies, one-module Workers, and script names.
import {createHash} from 'node:crypto'
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import type {UploadScript} from '../../src/protocol/management-api.js'

export const FIXTURES_DIR = fileURLToPath(new URL('../../fixtures/workers/', import.meta.url))

interface FixtureManifest {
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

/** The upload body for a fixture under fixtures/workers; its release generation is a digest of the body. */
export function fixtureUpload(fixture: string): UploadScript {
  const dir = path.join(FIXTURES_DIR, fixture)
  const manifest = JSON.parse(readFileSync(path.join(dir, 'edgeworker.json'), 'utf8')) as FixtureManifest
  return withGeneration({
    mainModule: manifest.main,
    compatibilityDate: manifest.compatibilityDate,
    builderPolicy: manifest.builderPolicy,
    tags: [`fixture:${fixture}`],
    modules: manifest.modules.map((name) => ({name, type: 'esModule', contentBase64: readFileSync(path.join(dir, name)).toString('base64')})),
    bindings: (manifest.durableObjects ?? []).map((object) => ({type: 'durable_object_namespace', name: object.binding, className: object.className})),
  })
}

/** An upload of one inline ES module, e.g. `export default {fetch() {return new Response('x')}}`. */
export function moduleUpload(source: string, bindings: UploadScript['bindings'] = []): UploadScript {
  return withGeneration({
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    builderPolicy: 'department-worker-project-v2.9',
    modules: [{name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')}],
    bindings,
  })
}

/** A Worker answering every request with `text`. */
export function textWorker(text: string): UploadScript {
  return moduleUpload(`export default { fetch() { return new Response(${JSON.stringify(text)}) } }`)
}

function withGeneration(upload: Omit<UploadScript, 'releaseGeneration'>): UploadScript {
  return {...upload, releaseGeneration: createHash('sha256').update(JSON.stringify(upload)).digest('hex').slice(0, 32)}
}
