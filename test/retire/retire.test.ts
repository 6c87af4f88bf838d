// Retirement and orphans end to end on both store backends, against a real edge host running real
// workerd: `retire` (lockdown and purges before the host's retire, the byte-exact 404 after it,
// pending when the host cannot be told), the host reconcile rules, and the orphan report.
import {existsSync, mkdtempSync, readdirSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, beforeEach, expect, test} from 'vitest'
import {canonicalDigest, sha256Hex} from '../../src/canonical-json.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {runPass} from '../../src/engine/pass/index.js'
import {runHostReconcile} from '../../src/engine/retire/host-reconcile.js'
import {orphanReport} from '../../src/engine/retire/orphan-report.js'
import {retireDepartment} from '../../src/engine/retire/retire-department.js'
import {deterministicId} from '../../src/store/index.js'
import {recordingLogger} from '../engine/pass/support.js'
import {writeAssetsSite} from '../support/cli.js'
import {FaultProxy} from '../support/fault-proxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness, type SettingsOverrides} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const HELLO = path.join(FIXTURES_DIR, 'hello')
const COUNTER = path.join(FIXTURES_DIR, 'counter')
const NOT_FOUND_BODY = /^\{"code":"worker_not_found","message":"Worker not found","requestId":"([0-9a-f-]{36})"\}$/

async function fetchText(url: string, init?: RequestInit): Promise<{status: number; body: string; headers: Headers}> {
  const response = await fetch(url, init)
  return {status: response.status, body: await response.text(), headers: response.headers}
}

describeEachStore('retirement', (t) => {
  let host: TestHost
  let proxy: FaultProxy
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost()
    proxy = await new FaultProxy(() => host.adminUrl).start()
  })
  afterAll(async () => {
    await proxy?.stop()
    await host?.stop()
  })
  beforeEach(async () => {
    proxy.rule = () => ({kind: 'forward'})
    await kit.pair(proxy.url)
  })

  async function recordingEngine(overrides: SettingsOverrides = {}): Promise<Engine & {log: ReturnType<typeof recordingLogger>}> {
    const engine = await createEngine(t.store, kit.settings(overrides), onPremHosts, recordingLogger())
    return engine as Engine & {log: ReturnType<typeof recordingLogger>}
  }

  async function deployed(engine: Engine, projectDir = HELLO) {
    const department = await kit.department()
    const outcome = await deployWorker(engine, {projectDir, departmentId: department, wait: true})
    expect(outcome.state).toBe('completed')
    return {department, outcome, url: outcome.url!}
  }

  test('retire soft-deletes, locks down and purges before the host retires; the URL answers the byte-exact 404 at once', async () => {
    const engine = await kit.engine()
    const {department, outcome, url} = await deployed(engine)
    await t.store.tenants.createServiceAccount({id: `${department}-bot`, department_id: department, name: 'bot'})
    expect((await fetchText(url)).status).toBe(200)

    const result = await retireDepartment(engine, {departmentId: department, companyId: kit.companyId})
    expect(result).toMatchObject({
      state: 'retired',
      serviceAccounts: [`${department}-bot`],
      steps: ['lockdown', 'access_policy', 'secrets_purge', 'credentials_purge', 'retire'],
    })
    const hostCalls = proxy.seen
      .filter((seen) => seen.url.includes(outcome.scriptName) && seen.method !== 'GET')
      .map((seen) => `${seen.method} ${seen.url.split(outcome.scriptName)[1]}`)
    expect(hostCalls.slice(-5)).toEqual(['POST /lockdown', 'PUT /access-policy', 'DELETE /secrets', 'DELETE /service-accounts', 'POST /retire'])

    const answer = await fetchText(url)
    expect(answer.status).toBe(404)
    expect(answer.body).toMatch(NOT_FOUND_BODY)
    expect(answer.headers.get('cache-control')).toBe('no-store')
    expect(answer.headers.get('x-request-id')).toBe(NOT_FOUND_BODY.exec(answer.body)![1])

    expect(await t.store.tenants.getDepartment(department)).toMatchObject({deleted_at: expect.any(Number)})
    expect((await t.store.tenants.listServiceAccounts(department))[0]).toMatchObject({deleted_at: expect.any(Number)})
    expect(await t.store.workers.get(outcome.workerId)).toMatchObject({status: 'retired', retired_at: expect.any(Number)})
    const scope = (await kit.pair()).scope
    const accountRow = await t.store.audit.get(deterministicId('service_account.deleted', `${department}-bot`))
    expect(accountRow).toMatchObject({
      resource_type: 'service_account',
      auth_method: 'department_delete',
      digest: canonicalDigest({deleted: true, reason: 'department_deleted', service_account_id: `${department}-bot`}),
    })
    const system = {resource_type: 'edge_worker', resource_id: outcome.workerId, actor_type: 'system', actor_id: '', auth_method: 'system', result: 'success'}
    expect(await t.store.audit.get(deterministicId('department.worker_script_deleted', outcome.workerId, scope))).toMatchObject({...system, reason_code: scope})
    expect(await t.store.audit.get(deterministicId('department.worker_retired', outcome.workerId, ''))).toMatchObject({...system, reason_code: null})

    // Idempotent: again → already retired, nothing written or sent.
    const auditRows = (await t.store.audit.list({limit: 1000})).length
    const calls = proxy.seen.length
    expect(await retireDepartment(engine, {departmentId: department})).toMatchObject({state: 'already_retired'})
    expect((await t.store.audit.list({limit: 1000})).length).toBe(auditRows)
    expect(proxy.seen.length).toBe(calls)
  })

  test('while the host retire step is held back the Worker answers 403 worker_retired; its Durable Object data stays on disk', async () => {
    const engine = await kit.engine()
    const {department, outcome, url} = await deployed(engine, COUNTER)
    expect((await fetchText(`${url}?name=kept`, {method: 'POST'})).body).toBe('{"name":"kept","value":1}')
    let whileHeld: {status: number; body: string} | undefined
    proxy.rule = ({method, url: target}) =>
      method === 'POST' && target.endsWith('/retire')
        ? {kind: 'before_forward', run: async () => void (whileHeld = await fetchText(`${url}?name=kept`))}
        : {kind: 'forward'}
    expect(await retireDepartment(engine, {departmentId: department})).toMatchObject({state: 'retired'})
    expect(whileHeld).toMatchObject({status: 403, body: '{"code":"worker_retired","message":"Forbidden"}'})
    expect((await fetchText(url)).status).toBe(404)
    const files = readdirSync(host.dataDir, {recursive: true, encoding: 'utf8'}).filter((file) => file.includes(outcome.scriptName))
    expect(files.some((file) => file.endsWith('.sqlite'))).toBe(true)
  })

  test('a host step failing before the retire leaves the retirement pending; a host reconcile run finishes it', async () => {
    const engine = await recordingEngine({host_reconcile: {lockdown_budget_seconds: 1}})
    const {department, outcome, url} = await deployed(engine)
    proxy.rule = ({method}) => (method === 'GET' ? {kind: 'forward'} : {kind: 'answer', status: 503, body: {code: 'unavailable', message: 'down'}})
    const seenBefore = proxy.seen.length
    const result = await retireDepartment(engine, {departmentId: department})
    expect(result).toMatchObject({state: 'pending', code: 'edge_host_5xx'})
    expect(proxy.seen.slice(seenBefore).some((seen) => seen.url.endsWith('/retire'))).toBe(false)
    expect(engine.log.messages('error')).toContainEqual(expect.stringMatching(/^edge_worker_onprem_retirement_failed: edge_host_5xx/))
    expect(await t.store.tenants.getDepartment(department)).toMatchObject({deleted_at: expect.any(Number)})
    expect(await t.store.workers.get(outcome.workerId)).toMatchObject({status: 'retiring', retired_at: null})
    expect((await fetchText(url)).status).toBe(200) // the host applied nothing

    // Failing for the stuck threshold is reported.
    t.clock.advance(301_000)
    await runHostReconcile(engine)
    expect(engine.log.messages('warn')).toContainEqual(
      expect.stringMatching(new RegExp(`^edge_worker_onprem_retirement_stuck: edge_host_5xx for 301s \\(${outcome.scriptName}\\)$`)),
    )

    proxy.rule = () => ({kind: 'forward'})
    const pass = await runHostReconcile(engine)
    expect(pass.scripts).toContainEqual({kind: 'department', scriptName: outcome.scriptName, workerId: outcome.workerId, outcome: 'retired'})
    expect((await fetchText(url)).body).toMatch(NOT_FOUND_BODY)
    expect(await retireDepartment(engine, {departmentId: department})).toMatchObject({state: 'already_retired'})
  })

  test('a company purge leaves orphans; host reconcile retires them, purges their data, and the report settles at 0', async () => {
    const engine = await recordingEngine()
    const first = await deployed(engine)
    // A Worker with Durable Object data (KV, D1, R2 and queue data live in the same storage).
    const counter = await deployed(engine, COUNTER)
    expect((await fetchText(`${counter.url}?name=visits`, {method: 'POST'})).status).toBe(200)
    const counterData = path.join(host.dataDir, 'do', counter.outcome.scriptName)
    expect(existsSync(counterData)).toBe(true)
    await t.store.tenants.purgeCompany(kit.companyId)

    const before = await orphanReport(engine)
    expect(before).toMatchObject({namespace: (await kit.pair()).scope, orphans_pending: 2, orphans_unsettled: 2, worker_rows: 0, stored_name_differs: 0})
    expect(before.unowned_serving_code).toBeGreaterThanOrEqual(2)
    expect(Object.keys(before)).toEqual([...Object.keys(before)].sort())
    t.clock.advance(901_000)
    expect((await orphanReport(engine)).orphans_unsettled).toBe(0)

    // Through the pass runner's host_reconcile lane, as cron runs it.
    const pass = await runPass(engine, {lanes: ['host_reconcile']})
    expect(pass.lanes[0]).toMatchObject({lane: 'host_reconcile', retried: 0, failed: 0})
    expect(pass.lanes[0]!.completed).toBeGreaterThanOrEqual(2)
    expect(engine.log.messages('info')).toContain(`edge_worker_onprem_orphan_retired: ${first.outcome.scriptName}`)
    expect((await fetchText(first.url)).body).toMatch(NOT_FOUND_BODY)
    expect(existsSync(counterData)).toBe(false)
    expect(await orphanReport(engine)).toMatchObject({orphans_pending: 0, orphans_unsettled: 0, unowned_serving_code: 0})
  })

  test('the orphan report lists the asset objects no version serves and the host asset files no release names, and nothing served', async () => {
    const engine = await recordingEngine()
    const department = await kit.department()
    const sites = mkdtempSync(path.join(tmpdir(), 'edgeworkers-orphan-assets-'))
    let deploys = 0
    const deploySite = async (files: Record<string, string>) => {
      const dir = writeAssetsSite(sites, `release-${++deploys}`, files)
      expect((await deployWorker(engine, {projectDir: dir, departmentId: department, wait: true})).state).toBe('completed')
    }
    // The host keeps a script's release and the one before: after the third, a.txt is named by no
    // release there, but the first version, kept in the store, still serves it.
    await deploySite({'a.txt': 'only in the first release', 'b.txt': 'in the first two'})
    await deploySite({'b.txt': 'in the first two', 'c.txt': 'in the last two'})
    await deploySite({'c.txt': 'in the last two', 'd.txt': 'only in the third'})
    const stray = await engine.artifacts.put('asset', Buffer.from('put by a deploy that never committed'))

    const report = await orphanReport(engine)
    expect(report.asset_objects_unreferenced).toEqual([stray])
    expect(report.host_asset_files_unreferenced).toEqual([sha256Hex('only in the first release')])
    expect(Object.keys(report)).toEqual([...Object.keys(report)].sort())
  })

  test('an unpaired store retires nothing', async () => {
    const engine = await recordingEngine()
    const {url} = await deployed(engine)
    await t.store.tenants.purgeCompany(kit.companyId)
    await t.store.kit.unpair((await kit.pair()).scope)
    const pass = await runHostReconcile(engine)
    expect(pass).toMatchObject({skipped: expect.stringMatching(/^edge_host_unpaired: /), scripts: []})
    expect(engine.log.messages('warn')).toContainEqual(expect.stringMatching(/^edge_host_unpaired: .*nothing retired$/))
    expect((await fetchText(url)).status).toBe(200)
  })

  test('a script name stored on a Worker row is never retired as an orphan', async () => {
    const engine = await recordingEngine()
    const {outcome, url} = await deployed(engine)
    const scope = (await kit.pair()).scope
    // A deploy row of a hard-deleted Worker that recorded the live Worker's script name.
    await t.store.outbox.enqueue({
      operation: 'deploy',
      dedupe_key: 'deploy:gone-worker:v:0',
      dispatch_namespace: scope,
      company_id: 'gone',
      department_id: 'gone-dept',
      worker_id: 'gone-worker',
      version_id: 'v',
      script_name: outcome.scriptName,
      payload: {releaseGeneration: 'rg', baseRevision: 0},
    })
    const pass = await runHostReconcile(engine)
    expect(pass.scripts).toContainEqual({kind: 'orphan', scriptName: outcome.scriptName, workerId: 'gone-worker', outcome: 'protected'})
    expect(engine.log.messages('error')).toContain(`edge_worker_onprem_orphan_owned: ${outcome.scriptName}`)
    expect((await fetchText(url)).status).toBe(200)
  })

  test('dry run and bad input write nothing', async () => {
    const engine = await kit.engine()
    const {department, url} = await deployed(engine)
    // The deploy wrote its history row; the retirement attempts below must add nothing.
    const auditBefore = await t.store.audit.list()
    const plan = await retireDepartment(engine, {departmentId: department, dryRun: true})
    expect(plan).toMatchObject({state: 'planned', steps: ['lockdown', 'access_policy', 'secrets_purge', 'credentials_purge', 'retire']})
    await t.store.tenants.createCompany({id: 'other', name: 'Other'})
    await expect(retireDepartment(engine, {departmentId: 'no-such'})).rejects.toThrow('department no-such not found')
    await expect(retireDepartment(engine, {departmentId: department, companyId: 'other'})).rejects.toThrow(
      `department ${department} not found in company other`,
    )
    await expect(retireDepartment(engine, {departmentId: department, companyId: 'nope'})).rejects.toThrow('company nope not found')
    expect(await t.store.tenants.getDepartment(department)).toMatchObject({deleted_at: null})
    expect(await t.store.audit.list()).toEqual(auditBefore)
    expect(auditBefore.map((row) => row.action)).toEqual(['edge_worker.deployed'])
    expect((await fetchText(url)).status).toBe(200)

    const empty = await kit.department()
    expect(await retireDepartment(engine, {departmentId: empty})).toMatchObject({state: 'no_worker'})
    await expect(retireDepartment(engine, {departmentId: empty})).rejects.toThrow(`department ${empty} is already deleted`)
  })

  test('listing failures and a listing past the page cap are errors', async () => {
    const engine = await kit.engine({host_reconcile: {listing_max_pages: 3}})
    const seenBefore = proxy.seen.length
    proxy.rule = ({url}) =>
      url.startsWith('/v1/scripts?') || url === '/v1/scripts' ? {kind: 'answer', status: 200, body: {scripts: [], nextCursor: 'more'}} : {kind: 'forward'}
    await expect(orphanReport(engine)).rejects.toThrow('edge host script listing did not end')
    expect(proxy.seen.slice(seenBefore).filter((seen) => seen.url.startsWith('/v1/scripts'))).toHaveLength(3)
    proxy.rule = ({url}) => (url.startsWith('/v1/scripts') ? {kind: 'answer', status: 503, body: {code: 'x', message: 'y'}} : {kind: 'forward'})
    await expect(orphanReport(engine)).rejects.toThrow('edge host script listing answered 503')
  })
})
