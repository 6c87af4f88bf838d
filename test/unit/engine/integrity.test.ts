import {writeFileSync} from 'node:fs'
import path from 'node:path'
import {describe, expect, test} from 'vitest'
import {canonicalJson, sha256Hex} from '../../../src/canonical-json.js'
import {overLimitMessage} from '../../../src/artifacts/size.js'
import {artifactKeyFor, FileArtifactStore} from '../../../src/artifacts/store.js'
import {createProjectArchive, readProjectArchive} from '../../../src/engine/project/archive.js'
import {buildVersion, type BuiltVersion} from '../../../src/engine/project/build.js'
import {parseBundle} from '../../../src/engine/project/bundle.js'
import {verifyStoredVersion, verifyVersionIntegrity, type IntegrityCheck, type VersionIntegrityInput} from '../../../src/engine/project/integrity.js'
import {DEFAULT_LIMITS, fixturePath, tempDir} from '../../engine/project-helpers.js'

const OTHER_DIGEST = 'f'.repeat(64)

async function built(): Promise<BuiltVersion> {
  return buildVersion(fixturePath('basic'), DEFAULT_LIMITS)
}

/** What the deploy task would pass for an untouched version: JSON round-tripped as the store would. */
function inputOf(version: BuiltVersion): VersionIntegrityInput {
  return {
    manifest: JSON.parse(JSON.stringify(version.manifest)),
    receipt: JSON.parse(JSON.stringify(version.receipt)),
    moduleTuple: [...version.moduleTuple],
    digests: {...version.digests},
    releaseGeneration: version.releaseGeneration,
    projectBytes: Buffer.from(version.projectArchive),
    bundleBytes: Buffer.from(version.bundle),
    limits: DEFAULT_LIMITS,
  }
}

async function expectFailure(input: VersionIntegrityInput, check: IntegrityCheck, reason: RegExp): Promise<void> {
  const result = await verifyVersionIntegrity(input)
  expect(result).toEqual({ok: false, code: 'artifact_integrity_failed', check, reason: expect.stringMatching(reason)})
  if (!result.ok) expect(result.reason).not.toContain('\n')
}

describe('verifyVersionIntegrity', () => {
  test('an untouched version passes and yields the modules to upload', async () => {
    const version = await built()
    const result = await verifyVersionIntegrity(inputOf(version))
    if (!result.ok) throw new Error(`unexpected failure: ${result.reason}`)
    expect(result.receipt).toEqual(version.receipt)
    expect(result.manifest).toEqual(version.manifest)
    expect(result.bundle.mainModule).toBe('index.js')
    expect(result.bundle.modules.map((module) => module.name)).toEqual(version.moduleTuple)
    expect(result.bundle.durableObjects).toEqual([{binding: 'COUNTER', className: 'Counter'}])
  })

  test('a tampered bundle fails on bundleDigest', async () => {
    const input = inputOf(await built())
    const bundle = JSON.parse(Buffer.from(input.bundleBytes).toString('utf8')) as {modules: {contentBase64: string}[]}
    bundle.modules[0]!.contentBase64 = Buffer.from('export default {fetch: () => new Response("pwned")}').toString('base64')
    input.bundleBytes = Buffer.from(canonicalJson(bundle))
    await expectFailure(input, 'digest', /^bundleDigest mismatch: the receipt says [0-9a-f]{12}…, the bundle read back gives [0-9a-f]{12}…$/)
  })

  test('a tampered project archive fails on projectDigest', async () => {
    const input = inputOf(await built())
    const files = await readProjectArchive(input.projectBytes)
    input.projectBytes = createProjectArchive([...files, {path: 'extra.js', bytes: Buffer.from('x')}])
    await expectFailure(input, 'digest', /^projectDigest mismatch: .* the project archive read back gives/)
  })

  test('a bundle swapped together with its digests is caught by the SBOM and the release generation', async () => {
    const version = await built()
    const input = inputOf(version)
    const bundle = JSON.parse(version.bundle.toString('utf8')) as {modules: {contentBase64: string}[]}
    bundle.modules[0]!.contentBase64 = Buffer.from('export default {}').toString('base64')
    input.bundleBytes = Buffer.from(canonicalJson(bundle))
    const bundleDigest = sha256Hex(input.bundleBytes)
    input.digests.bundleDigest = bundleDigest
    ;(input.receipt as Record<string, unknown>).bundleDigest = bundleDigest
    await expectFailure(input, 'digest', /^sbomDigest mismatch: .* the SBOM rebuilt from the manifest, lock and bundle gives/)
  })

  test('a digest on the version that differs from the receipt fails, naming the digest', async () => {
    const input = inputOf(await built())
    input.digests.staticDataDigest = OTHER_DIGEST
    await expectFailure(input, 'digest', /^staticDataDigest on the version \(ffffffffffff…\) differs from the build receipt/)
  })

  test('a receipt digest that does not match what it covers fails, naming the digest', async () => {
    const input = inputOf(await built())
    input.digests.dependencyDigest = OTHER_DIGEST
    ;(input.receipt as Record<string, unknown>).dependencyDigest = OTHER_DIGEST
    await expectFailure(input, 'digest', /^dependencyDigest mismatch: the receipt says ffffffffffff…, the manifest's dependencies gives/)
  })

  test.each([
    {
      name: 'an extra key',
      change: (receipt: Record<string, unknown>) => (receipt.signedBy = 'me'),
      reason: /^build receipt key set is wrong: unexpected signedBy$/,
    },
    {
      name: 'a missing key',
      change: (receipt: Record<string, unknown>) => delete receipt.sbom,
      reason: /^build receipt key set is wrong: missing sbom$/,
    },
    {
      name: 'a renamed key',
      change: (receipt: Record<string, unknown>) => {
        receipt.release_generation = receipt.releaseGeneration
        delete receipt.releaseGeneration
      },
      reason: /^build receipt key set is wrong: missing releaseGeneration; unexpected release_generation$/,
    },
  ])('a receipt with $name fails on its key set', async ({change, reason}) => {
    const input = inputOf(await built())
    change(input.receipt as Record<string, unknown>)
    await expectFailure(input, 'receipt_keys', reason)
  })

  test('a receipt that is not an object fails on its key set', async () => {
    const input = inputOf(await built())
    input.receipt = ['builderPolicy']
    await expectFailure(input, 'receipt_keys', /^build receipt is not a JSON object$/)
  })

  test.each([['2'], [1], [null]])('receiptVersion %j is refused', async (receiptVersion) => {
    const input = inputOf(await built())
    ;(input.receipt as Record<string, unknown>).receiptVersion = receiptVersion
    await expectFailure(input, 'receipt_version', /^build receipt version is .*; expected "1"$/)
  })

  test('a malformed receipt value fails', async () => {
    const input = inputOf(await built())
    ;(input.receipt as Record<string, unknown>).lockDigest = 'not-hex'
    await expectFailure(input, 'receipt', /^build receipt key "lockDigest" must be 64 lowercase hex$/)
  })

  test('receipt static data that differs from what its digest covers fails', async () => {
    const input = inputOf(await built())
    ;(input.receipt as Record<string, unknown>).staticData = {greeting: 'forged'}
    await expectFailure(input, 'receipt', /^build receipt staticData does not hash to its staticDataDigest$/)
  })

  test('a receipt SBOM that differs from what its digest covers fails', async () => {
    const input = inputOf(await built())
    ;(input.receipt as {sbom: {components: unknown[]}}).sbom.components = []
    await expectFailure(input, 'receipt', /^build receipt sbom does not hash to its sbomDigest$/)
  })

  test('a receipt whose release generation does not recompute fails', async () => {
    const input = inputOf(await built())
    ;(input.receipt as Record<string, unknown>).releaseGeneration = '0'.repeat(32)
    await expectFailure(input, 'release_generation', /^build receipt release generation 0{32} does not match the recomputed [0-9a-f]{32}$/)
  })

  test('a version whose recorded release generation does not recompute fails', async () => {
    const input = inputOf(await built())
    input.releaseGeneration = '0'.repeat(32)
    await expectFailure(input, 'release_generation', /^release generation 0{32} on the version does not match/)
  })

  test('a receipt built under another builder policy fails', async () => {
    const input = inputOf(await built())
    ;(input.receipt as Record<string, unknown>).builderPolicy = 'department-worker-project-v2.5'
    await expectFailure(input, 'receipt', /^build receipt builderPolicy department-worker-project-v2\.5 differs from the manifest's/)
  })

  test('a stored manifest that is no longer valid fails on the manifest', async () => {
    const input = inputOf(await built())
    ;(input.manifest as Record<string, unknown>).builderPolicy = 'department-worker-project-v2.99'
    await expectFailure(input, 'manifest', /^stored manifest: key "builderPolicy": unknown builder policy/)
  })

  test('a stored manifest that differs from the archived one fails on the manifest', async () => {
    const input = inputOf(await built())
    ;(input.manifest as Record<string, unknown>).staticData = {greeting: 'changed'}
    await expectFailure(input, 'manifest', /^the edgeworker\.json in the project archive differs from the stored manifest$/)
  })

  test('a recorded module tuple that differs from the manifest fails', async () => {
    const input = inputOf(await built())
    input.moduleTuple = ['counter.mjs', 'index.js', 'lib/util.js']
    await expectFailure(
      input,
      'module_tuple',
      /^recorded module tuple \[counter\.mjs, index\.js, lib\/util\.js\] differs from the manifest's \[index\.js, counter\.mjs, lib\/util\.js\]$/,
    )
  })

  test('a bundle missing a module fails on the module tuple, even with consistent digests', async () => {
    const version = await built()
    const input = inputOf(version)
    const bundle = JSON.parse(version.bundle.toString('utf8')) as {modules: unknown[]}
    bundle.modules.pop()
    input.bundleBytes = Buffer.from(canonicalJson(bundle))
    input.digests.bundleDigest = sha256Hex(input.bundleBytes)
    ;(input.receipt as Record<string, unknown>).bundleDigest = input.digests.bundleDigest
    await expectFailure(
      input,
      'module_tuple',
      /^bundle modules \[index\.js, counter\.mjs\] differ from the manifest's \[index\.js, counter\.mjs, lib\/util\.js\]$/,
    )
  })

  test('artifacts over the configured limits on read-back fail', async () => {
    const version = await built()
    await expectFailure(
      {...inputOf(version), limits: {...DEFAULT_LIMITS, project_archive_max_bytes: version.projectArchive.length - 1}},
      'artifact_size',
      /^project archive is \d+ bytes; the limit is \d+ bytes \(read back\)$/,
    )
    await expectFailure(
      {...inputOf(version), limits: {...DEFAULT_LIMITS, bundle_max_bytes: 1024}},
      'artifact_size',
      /^bundle is [\d.]+ KiB; the limit is 1 KiB \(read back\)$/,
    )
  })
})

describe('verifyStoredVersion', () => {
  async function stored() {
    const store = await FileArtifactStore.open(tempDir())
    const version = await built()
    const projectKey = await store.put('project', version.projectArchive)
    const bundleKey = await store.put('bundle', version.bundle)
    const {projectBytes: _project, bundleBytes: _bundle, limits: _limits, ...recorded} = inputOf(version)
    return {store, version, stored: {...recorded, projectKey, bundleKey}}
  }

  test('reads the artifacts back and verifies them', async () => {
    const {store, stored: storedVersion} = await stored()
    const result = await verifyStoredVersion(store, storedVersion, DEFAULT_LIMITS)
    expect(result.ok).toBe(true)
  })

  test('a missing artifact fails', async () => {
    const {store, stored: storedVersion} = await stored()
    await store.delete(storedVersion.bundleKey)
    expect(await verifyStoredVersion(store, storedVersion, DEFAULT_LIMITS)).toEqual({
      ok: false,
      code: 'artifact_integrity_failed',
      check: 'artifact_missing',
      reason: `bundle artifact ${storedVersion.bundleKey} is missing`,
    })
  })

  test('an artifact over the limit is refused on read-back', async () => {
    const {store, version, stored: storedVersion} = await stored()
    const result = await verifyStoredVersion(store, storedVersion, {...DEFAULT_LIMITS, project_archive_max_bytes: 100})
    expect(result).toEqual({
      ok: false,
      code: 'artifact_integrity_failed',
      check: 'artifact_size',
      reason: overLimitMessage(`project artifact ${storedVersion.projectKey}`, version.projectArchive.length, 100),
    })
  })

  test('an artifact whose bytes changed on disk fails its SHA-256', async () => {
    const {store, stored: storedVersion} = await stored()
    writeFileSync(path.join(store.root, ...storedVersion.bundleKey.split('/')), 'garbage')
    expect(await verifyStoredVersion(store, storedVersion, DEFAULT_LIMITS)).toMatchObject({
      ok: false,
      check: 'digest',
      reason: `bundle artifact ${storedVersion.bundleKey} does not hash to its key`,
    })
  })

  test('an artifact key that does not name the recorded digest fails', async () => {
    const {store, stored: storedVersion} = await stored()
    const wrongKey = artifactKeyFor('bundle', OTHER_DIGEST)
    expect(await verifyStoredVersion(store, {...storedVersion, bundleKey: wrongKey}, DEFAULT_LIMITS)).toMatchObject({
      ok: false,
      check: 'artifact_key',
      reason: `bundle artifact key ${wrongKey} does not name the recorded digest ${storedVersion.digests.bundleDigest.slice(0, 12)}…`,
    })
  })
})

describe('parseBundle', () => {
  const base64 = (text: string) => Buffer.from(text).toString('base64')
  const bundleOf = (document: unknown) => Buffer.from(JSON.stringify(document))
  const valid = {
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    modules: [
      {name: 'index.js', contentBase64: base64('export default {}')},
      {name: 'lib.js', contentBase64: base64('export const x = 1')},
    ],
    durableObjects: [],
  }

  test('decodes the modules for the upload', () => {
    const bundle = parseBundle(bundleOf(valid))
    expect(bundle.modules.map((module) => [module.name, module.content.toString('utf8')])).toEqual([
      ['index.js', 'export default {}'],
      ['lib.js', 'export const x = 1'],
    ])
  })

  test.each([
    {name: 'not JSON', bytes: Buffer.from('{'), reason: /it is not JSON$/},
    {name: 'an unknown key', bytes: bundleOf({...valid, extra: 1}), reason: /bundle is malformed: /},
    {name: 'no modules', bytes: bundleOf({...valid, modules: []}), reason: /bundle is malformed: modules: /},
    {
      name: 'bad base64',
      bytes: bundleOf({...valid, modules: [{name: 'index.js', contentBase64: 'not base64!'}]}),
      reason: /module "index\.js" is not valid base64$/,
    },
    {
      name: 'a duplicate module',
      bytes: bundleOf({...valid, modules: [valid.modules[0], valid.modules[0]]}),
      reason: /module "index\.js" appears twice$/,
    },
    {
      name: 'the main module not first',
      bytes: bundleOf({...valid, modules: [...valid.modules].reverse()}),
      reason: /the first module is not the main module "index\.js"$/,
    },
  ])('refuses $name', ({bytes, reason}) => {
    expect(() => parseBundle(bytes)).toThrow(reason)
  })
})
