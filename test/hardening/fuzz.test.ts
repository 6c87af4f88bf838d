// A bounded, seeded fuzz (issue #15): 1,500 malformed management API calls — unsigned,
// with forged signatures, and correctly signed with broken bodies — and 3,200 mutated
// manifests. The host never answers 5xx, stays alive and writes nothing; the manifest parser
// accepts or refuses with a one-line KitError, never anything else, and agrees with JSON.parse.
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {loadWorkerProject, parseManifest} from '../../src/engine/project/manifest.js'
import {KitError} from '../../src/errors.js'
import {paths} from '../support/paths.js'
import {signRequest} from '../../src/protocol/signing.js'
import {parseStrictJson, StrictJsonError} from '../../src/util/strict-json.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {moduleUpload, scriptNameFor} from '../support/worker-fixtures.js'

/** mulberry32: the same cases on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

const SEED = 15
const next = random(SEED)
const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!
const int = (below: number) => Math.floor(next() * below)

const JUNK = ['{', '}', '[', ']', '"', ':', ',', '\\', '\u0000', '\u001b', 'null', '1e999', '-0', '"__proto__"', '\ud800', 'é', ' ', '\n']

/** A mutation of `text`: flipped, inserted, deleted or duplicated pieces, or a truncation. */
function mutate(text: string): string {
  let out = text
  for (let round = 1 + int(3); round > 0; round--) {
    const at = int(out.length + 1)
    switch (int(6)) {
      case 0:
        out = out.slice(0, at) + pick(JUNK) + out.slice(at)
        break
      case 1:
        out = out.slice(0, at) + out.slice(at + 1 + int(8))
        break
      case 2:
        out = out.slice(0, at)
        break
      case 3: {
        const depth = pick([10, 63, 64, 65, 1_000, 50_000])
        out = out.slice(0, at) + '['.repeat(depth) + ']'.repeat(depth) + out.slice(at)
        break
      }
      case 4: {
        // A key repeated: {"a":1} → {"a":1,"a":1}
        const key = /"([A-Za-z]+)":("[^"]*"|\d+|true|false|null)/.exec(out.slice(at))
        if (key) out = out.replace(key[0], `${key[0]},${key[0]}`)
        break
      }
      default:
        out = out.slice(0, at) + String.fromCharCode(int(0x3000)) + out.slice(at)
    }
  }
  return out
}

const MANIFEST = JSON.stringify({
  name: 'hello',
  main: 'index.js',
  modules: ['index.js', 'lib/util.js'],
  compatibilityDate: '2026-11-01',
  builderPolicy: 'department-worker-project-v2.9',
  durableObjects: [{binding: 'COUNTER', className: 'Counter'}],
  staticData: {greeting: 'hi', nested: {list: [1, 2, 3]}},
  dependencies: {'left-pad': '1.3.0'},
})

test('3,000 mutated manifests: accepted or refused with one line, in agreement with JSON.parse', () => {
  for (let i = 0; i < 3_000; i++) {
    // As bytes: a lone surrogate the mutation inserted becomes U+FFFD, for both parsers alike.
    const bytes = Buffer.from(mutate(MANIFEST))
    const text = bytes.toString('utf8')
    let standard: unknown
    let standardOk = true
    try {
      standard = JSON.parse(text)
    } catch {
      standardOk = false
    }
    let strict: unknown
    try {
      strict = parseStrictJson(bytes)
    } catch (error) {
      expect(error, text.slice(0, 200)).toBeInstanceOf(StrictJsonError)
      continue
    }
    // Whatever the strict parser accepts, JSON.parse reads the same way.
    expect(standardOk, text.slice(0, 200)).toBe(true)
    expect(strict).toEqual(standard)
    try {
      parseManifest(strict)
    } catch (error) {
      expect(error, text.slice(0, 200)).toBeInstanceOf(KitError)
      expect((error as KitError).message.split('\n')).toHaveLength(1)
    }
  }
})

test('200 mutated projects through the project loader: only one-line usage errors', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-fuzz-'))
  try {
    writeFileSync(path.join(dir, 'index.js'), 'export default {fetch() {return new Response("x")}}')
    for (let i = 0; i < 200; i++) {
      writeFileSync(path.join(dir, 'edgeworker.json'), mutate(MANIFEST))
      const error = await loadWorkerProject(dir, 1024 * 1024).then(
        () => null,
        (caught: unknown) => caught,
      )
      if (error === null) continue
      expect(error).toBeInstanceOf(KitError)
      expect((error as KitError).code).toBe('usage')
      expect((error as KitError).message.split('\n')).toHaveLength(1)
    }
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

function isJson(body: string | Buffer): boolean {
  try {
    parseStrictJson(body)
    return true
  } catch {
    return false
  }
}

let host: TestHost
let secret: string

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 1}})
  secret = (await host.pair()).secret
}, 60_000)

afterAll(async () => {
  await host?.stop()
})

test('1,500 malformed management calls: no 5xx, the host alive, nothing written', async () => {
  const name = scriptNameFor('fuzz/target')
  const templates = [
    paths.script(name),
    `${paths.script(name)}/retire`,
    `${paths.script(name)}/lockdown`,
    `${paths.script(name)}/access-policy`,
    `${paths.script(name)}/secrets/API_KEY`,
    `${paths.script(name)}/service-accounts/sa-1`,
    '/v1/scripts',
    '/v1/inventory',
    '/v1/fence',
    '/v1/fence/f-1/end',
    '/v1/receipts/m-1/ack',
    '/v1/pair',
    '/v1/snapshot?fenceId=x',
    '/v1/scripts/..%2f..%2fetc',
    `/v1/scripts/${'a'.repeat(5_000)}`,
  ]
  const validUpload = JSON.stringify(moduleUpload('export default {fetch() {return new Response("x")}}'))
  const bodies = [validUpload, JSON.stringify({code: 'ABCD-EFGH'}), JSON.stringify({ttlSeconds: 60, reason: 'x', fenceId: 'f-1'}), '{}', '[]']
  const statuses = new Map<number, number>()
  const cases: Array<() => Promise<void>> = []
  for (let i = 0; i < 1_500; i++) {
    const method = pick(['GET', 'PUT', 'POST', 'DELETE', 'PATCH'] as const)
    const target = next() < 0.1 ? mutate(pick(templates)).replace(/[\s#]/g, '') || '/' : pick(templates)
    let raw: string | Buffer = next() < 0.05 ? Buffer.from(Array.from({length: int(512)}, () => int(256))) : mutate(pick(bodies))
    const headers: Record<string, string> = {'content-type': pick(['application/json', 'application/json; charset=utf-8', 'text/plain'])}
    const signing = pick(['none', 'forged', 'signed'] as const)
    if (signing === 'forged') Object.assign(headers, signRequest({secret: 'b'.repeat(64), method, target, body: raw}))
    // A signed body that is empty or still parses is made not to, so that no signed call can write.
    if (signing === 'signed' && (raw.length === 0 || isJson(raw))) raw = `${raw.toString()}}`
    if (signing === 'signed' && target.startsWith('/')) Object.assign(headers, signRequest({secret, method, target, body: raw}))
    cases.push(async () => {
      let status: number
      try {
        const response = await request(`${host.adminUrl}${target.startsWith('/') ? target : `/${target}`}`, {
          method,
          headers,
          body: method === 'GET' ? undefined : raw,
        })
        await response.body.dump()
        status = response.statusCode
      } catch {
        status = -1 // the client refused to send it (an invalid path or header); not the host's answer
      }
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
      expect(status, `${method} ${target.slice(0, 120)} (${signing})`).toBeLessThan(500)
    })
  }
  // The cases are drawn in order (the seed decides them); eight run at a time.
  for (let start = 0; start < cases.length; start += 8) await Promise.all(cases.slice(start, start + 8).map((run) => run()))
  console.log('management fuzz statuses', Object.fromEntries(statuses))
  expect((await fetch(`${host.adminUrl}/livez`)).status).toBe(200)
  const client = host.client()
  expect((await client.call('GET', paths.inventory)).body.scripts).toEqual([])
  expect((await client.call('GET', '/v1/fence')).body).toEqual({active: null, recent: []})
}, 60_000)
