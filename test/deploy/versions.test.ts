// versions list|show|diff|deploy and rollback's refusal of a version whose artifacts are gone, on
// both store backends, against a real edge host running real workerd.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, beforeEach, expect, test} from 'vitest'
import type {KitError} from '../../src/errors.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {rollbackWorker} from '../../src/engine/deploy/rollback.js'
import {deploymentStatus, listDeployments} from '../../src/engine/versions/deployments.js'
import {DEPLOYMENT_CHANGED_ACTION, deployVersions} from '../../src/engine/versions/deploy-versions.js'
import {diffWorkerVersions} from '../../src/engine/versions/diff.js'
import {listWorkerVersions, showWorkerVersion} from '../../src/engine/versions/queries.js'
import {scriptNameFor} from '../../src/store/index.js'
import {writeProject} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-versions-'))
afterAll(() => rmSync(root, {recursive: true, force: true}))

const manifest = (fields: Record<string, unknown>) =>
  JSON.stringify({name: 'shop', main: 'index.js', compatibilityDate: '2026-11-01', builderPolicy: 'department-worker-project-v2.9', ...fields})
const INDEX = `import {x} from './util.js'\nexport default {fetch() {return new Response('shop ' + x)}}\n`

/** Version A: two modules, a KV namespace, two vars, two asset files. */
const SHOP_A = writeProject(root, 'shop-a', {
  'edgeworker.json': manifest({
    modules: ['index.js', 'util.js'],
    vars: {GREETING: 'hi', MODE: 'a'},
    kvNamespaces: [{binding: 'CACHE', id: 'cache'}],
    assets: {directory: 'public'},
  }),
  'index.js': INDEX,
  'util.js': 'export const x = 1\n',
  'public/a.html': '<p>a</p>\n',
  'public/b.txt': 'b\n',
})
/** Version B: util.js changed and a text module added; KV → R2; vars changed, removed, added; a flag and a later date; assets changed. */
const SHOP_B = writeProject(root, 'shop-b', {
  'edgeworker.json': manifest({
    modules: ['index.js', 'util.js', 'notes.txt'],
    compatibilityDate: '2026-11-10',
    compatibilityFlags: ['nodejs_compat'],
    vars: {GREETING: 'hello', LIMIT: 3},
    r2Buckets: [{binding: 'FILES', bucketName: 'files'}],
    assets: {directory: 'public', htmlHandling: 'none'},
  }),
  'index.js': INDEX,
  'util.js': 'export const x = 2\n',
  'notes.txt': 'notes\n',
  'public/a.html': '<p>a, again</p>\n',
  'public/c.txt': 'c\n',
})

const served = async (url: string) => (await (await fetch(new URL('page', url))).text()).trim()

describeEachStore('versions', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)
  const actor = {type: 'operator', id: 'alice'}

  beforeAll(async () => {
    host = await startTestHost()
  })
  afterAll(async () => {
    await host?.stop()
  })
  beforeEach(async () => {
    await kit.pair()
  })

  async function twoVersions() {
    const engine = await kit.engine()
    const department = await kit.department()
    const a = await deployWorker(engine, {projectDir: SHOP_A, departmentId: department, wait: true, notes: {message: 'first cut', tag: 'v1', author: 'alice'}})
    const b = await deployWorker(engine, {projectDir: SHOP_B, departmentId: department, wait: true, notes: {message: 'r2 and flags', tag: 'v2', author: 'bob'}})
    expect([a.state, b.state]).toEqual(['completed', 'completed'])
    return {engine, department, a, b}
  }

  test('versions list and show carry the notes, author, state, source, size and digests', async () => {
    const {engine, department, a, b} = await twoVersions()
    const list = await listWorkerVersions(engine, department)
    expect(list).toMatchObject({workerId: a.workerId, scriptName: a.scriptName, departmentId: department})
    expect(list.versions.map((v) => [v.id, v.tag, v.message, v.author, v.state, v.current])).toEqual([
      [a.versionId, 'v1', 'first cut', 'alice', 'superseded', false],
      [b.versionId, 'v2', 'r2 and flags', 'bob', 'deployed', true],
    ])
    expect(list.versions[0]!.source).toMatchObject({projectDir: SHOP_A, kind: 'edgeworker'})
    expect(list.versions[0]!.sizeBytes).toBeGreaterThan(0)
    expect(list.versions.map((v) => v.deployedAt !== null)).toEqual([true, true])

    // By tag, by prefix and by the same Worker's script name: the same version.
    const byTag = await showWorkerVersion(engine, department, 'v2')
    expect(await showWorkerVersion(engine, a.scriptName, b.versionId.slice(0, 8))).toEqual(byTag)
    expect(byTag).toMatchObject({
      id: b.versionId,
      releaseGeneration: b.releaseGeneration,
      compatibilityDate: '2026-11-10',
      compatibilityFlags: ['nodejs_compat'],
    })
    expect(byTag.digests.bundleDigest).toMatch(/^[0-9a-f]{64}$/)
    expect(Object.values(byTag.digests).every((digest) => /^[0-9a-f]{64}$/.test(digest ?? ''))).toBe(true)
    expect(byTag.modules.map((module) => module.name)).toEqual(['index.js', 'notes.txt', 'util.js'])

    await expect(showWorkerVersion(engine, department, 'nope')).rejects.toMatchObject({code: 'not_found'})
    await expect(listWorkerVersions(engine, 'no-such-department')).rejects.toMatchObject({code: 'not_found'})
  })

  test('versions diff names what changed in modules, bindings, vars, compatibility and assets', async () => {
    const {engine, department, a, b} = await twoVersions()
    const diff = await diffWorkerVersions(engine, department, 'v1', 'v2')
    expect(diff).toMatchObject({from: {id: a.versionId}, to: {id: b.versionId}, identical: false, assetFilesUnknown: []})
    const summary = Object.fromEntries(Object.entries(diff.changes).map(([section, changes]) => [section, changes.map((c) => `${c.change} ${c.name}`)]))
    expect(summary).toEqual({
      modules: ['added notes.txt', 'changed util.js'],
      bindings: ['removed kvNamespaces.CACHE', 'added r2Buckets.FILES'],
      vars: ['changed GREETING', 'added LIMIT', 'removed MODE'],
      compatibility: ['changed compatibilityDate', 'added compatibilityFlags.nodejs_compat'],
      assets: ['changed /a.html', 'removed /b.txt', 'added /c.txt', 'changed config'],
      other: [],
    })
    expect(diff.changes.vars[0]).toEqual({name: 'GREETING', change: 'changed', from: 'hi', to: 'hello'})
    expect(diff.changes.compatibility[0]).toEqual({name: 'compatibilityDate', change: 'changed', from: '2026-11-01', to: '2026-11-10'})

    const same = await diffWorkerVersions(engine, department, 'v2', b.versionId)
    expect(same.identical).toBe(true)
    expect(Object.values(same.changes).flat()).toEqual([])

    // A version whose bundle was cleaned up: everything but its asset files is still compared.
    await engine.artifacts.delete((await t.store.workers.getVersion(a.versionId))!.bundle_artifact_key)
    const partial = await diffWorkerVersions(engine, department, 'v1', 'v2')
    expect(partial.assetFilesUnknown).toEqual([a.versionId])
    expect(partial.changes.assets.map((c) => c.name)).toEqual(['config'])
    expect(partial.changes.modules).toEqual(diff.changes.modules)
  })

  test('deployments list and status: each version that served, newest first, deploys and rollbacks, the current one marked', async () => {
    const {engine, department, a, b} = await twoVersions()
    expect(await deploymentStatus(engine, department)).toMatchObject({
      deployment: {versions: [{versionId: b.versionId, percentage: 100, tag: 'v2'}], current: true},
    })
    const back = await rollbackWorker(engine, {departmentId: department, wait: true, actor, message: 'v2 breaks checkout'})
    expect(back.state).toBe('completed')
    const {deployments} = await listDeployments(engine, department)
    expect(
      deployments.map((d) => [d.versions.map((v) => `${v.versionId}@${v.percentage}`).join(' '), d.kind, d.rollbackOf, d.author, d.message, d.current]),
    ).toEqual([
      [`${back.versionId}@100`, 'rollback', a.versionId, 'alice', 'v2 breaks checkout', true],
      [`${b.versionId}@100`, 'deploy', null, 'bob', 'r2 and flags', false],
      [`${a.versionId}@100`, 'deploy', null, 'alice', 'first cut', false],
    ])
    expect((await deploymentStatus(engine, department)).deployment?.versions[0]?.versionId).toBe(back.versionId)

    const fresh = await kit.department()
    await t.store.workers.create({company_id: kit.companyId, department_id: fresh, script_name: scriptNameFor(kit.companyId, fresh), status: 'new'})
    expect(await deploymentStatus(engine, fresh)).toMatchObject({departmentId: fresh, deployment: null})
    await expect(listDeployments(engine, 'no-such-department')).rejects.toMatchObject({code: 'not_found'})
  })

  test('rollback to a version whose artifacts were cleaned up is refused with one line, and nothing is written', async () => {
    const {engine, department, a, b} = await twoVersions()
    const target = (await t.store.workers.getVersion(a.versionId))!
    await engine.artifacts.delete(target.bundle_artifact_key)
    const before = {
      versions: await t.store.workers.listVersions(a.workerId),
      outbox: await t.store.outbox.list(),
      audit: await t.store.audit.list({}),
    }
    const error = (await rollbackWorker(engine, {departmentId: department, to: 'v1', wait: true, actor}).catch((caught: unknown) => caught)) as KitError
    expect(error.code).toBe('conflict')
    expect(error.reason).toBe('artifact_integrity_failed')
    expect(error.message).toBe(`version ${a.versionId} cannot be rolled back to: bundle artifact ${target.bundle_artifact_key} is missing`)
    expect(error.message).not.toContain('\n')
    expect(await t.store.workers.listVersions(a.workerId)).toEqual(before.versions)
    expect(await t.store.outbox.list()).toEqual(before.outbox)
    expect(await t.store.audit.list({})).toEqual(before.audit)
    expect((await t.store.workers.get(a.workerId))?.current_version_id).toBe(b.versionId)
  })
  test('versions deploy <version>@100 serves a stored version again: a new version, its own audit row, the deploy task', async () => {
    const {engine, department, a, b} = await twoVersions()
    expect(await served(b.url!)).toBe('shop 2')
    const run = await deployVersions(engine, {departmentId: department, specs: ['v1@100%'], wait: true, actor, message: 'back to v1'})
    expect(run).toMatchObject({state: 'completed', rolledBackTo: a.versionId, releaseGeneration: a.releaseGeneration, reused: false})
    expect(await served(run.url!)).toBe('shop 1')
    const copy = (await t.store.workers.getVersion(run.versionId))!
    expect(copy).toMatchObject({rollback_of: a.versionId, message: 'back to v1', author: 'alice', state: 'deployed'})
    expect((await t.store.workers.get(a.workerId))?.current_version_id).toBe(run.versionId)
    const audit = await t.store.audit.list({action: DEPLOYMENT_CHANGED_ACTION, resourceId: a.workerId})
    expect(audit.map((row) => row.facts)).toEqual([expect.objectContaining({version_id: run.versionId, rollback_of: a.versionId})])
    expect((await t.store.outbox.list()).filter((row) => row.version_id === run.versionId).map((row) => [row.operation, row.status])).toEqual([
      ['deploy', 'completed'],
    ])
    // Promote the other one back; the current one at 100 is refused as already current.
    expect((await deployVersions(engine, {departmentId: department, specs: [`${b.versionId}@100`], wait: true, actor})).state).toBe('completed')
    expect(await served(run.url!)).toBe('shop 2')
    await expect(deployVersions(engine, {departmentId: department, specs: ['v2@100'], wait: true, actor})).rejects.toMatchObject({code: 'usage'})
  })

  test('versions deploy not adding up to 100 is refused with one line, and nothing is written', async () => {
    const {engine, department, a} = await twoVersions()
    const before = {versions: await t.store.workers.listVersions(a.workerId), outbox: await t.store.outbox.list(), audit: await t.store.audit.list({})}
    const refusal = (departmentId: string, specs: string[]) =>
      deployVersions(engine, {departmentId, specs, wait: true, actor}).catch((caught: unknown) => caught as KitError)

    expect(await refusal(department, ['v1@90', 'v2@20'])).toMatchObject({code: 'usage', message: 'the percentages add up to 110; they must add up to 100'})
    expect(await t.store.workers.listVersions(a.workerId)).toEqual(before.versions)
    expect(await t.store.outbox.list()).toEqual(before.outbox)
    expect(await t.store.audit.list({})).toEqual(before.audit)
  })
})
