// Control-plane work through a host outage (issue #29: "same for control-plane rows"): mutations the
// host applied but whose answers were lost (a `secret put`, an access-policy change), a receipt
// acknowledgement the host failed, and a retirement whose lockdown never reached the host, while the
// host is down for several passes. Nothing settles failed; every row waits with its reason and next
// attempt time (as `outbox list` shows it); no row counts more attempts than the times the host was
// asked for it; and everything completes at the first pass after the host is back. Real host, real
// workerd, both stores; the host goes down behind a proxy (its port refuses connections).
import path from 'node:path'
import {execa} from 'execa'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {applyControl, type ControlRequest} from '../../src/engine/control/apply.js'
import type {Engine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {runPass} from '../../src/engine/pass/run-pass.js'
import {retireDepartment} from '../../src/engine/retire/retire-department.js'
import type {OutboxRow} from '../../src/store/index.js'
import {CLI_BIN} from '../support/cli.js'
import {FaultProxy} from '../support/fault-proxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const CONTROL_ENV = path.join(FIXTURES_DIR, 'control-env')
const ACTOR = {type: 'operator', id: 'tester'}
const SECRET_VALUE = 'outage-secret-5d1e'
/** Cron's cadence: one pass a minute. */
const PASS_INTERVAL_MS = 60_000
const OUTAGE_PASSES = 5
const LANES = ['control_audit', 'host_reconcile'] as const

describeEachStore('control-plane rows through a host outage', (t) => {
  let host: TestHost
  let proxy: FaultProxy
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1}})
    proxy = await new FaultProxy(() => host.adminUrl).start()
  })
  afterAll(async () => {
    await proxy?.stop()
    await host?.stop()
  })

  async function deployed(engine: Engine): Promise<{department: string; scriptName: string}> {
    const department = await kit.department()
    const outcome = await deployWorker(engine, {projectDir: CONTROL_ENV, departmentId: department, wait: true})
    expect(outcome.state).toBe('completed')
    return {department, scriptName: outcome.scriptName}
  }
  const statusOf = async (scriptName: string) => {
    const response = await request(`${host.publicUrl}/${scriptName}/`)
    await response.body.dump()
    return response.statusCode
  }
  /** Requests about a control row that reached the host: its mutation (sent once, before the outage), its receipt's reads and acks. */
  const askedAbout = (row: OutboxRow) => 1 + proxy.seen.filter((seen) => seen.url.includes(`/v1/receipts/${row.id}`)).length
  const rowsOf = async (department: string) =>
    (await t.store.outbox.list({operation: 'control_audit', limit: 1_000})).filter((row) => row.department_id === department)

  test('lost answers, a failed ack and a lockdown wait through 5 passes of outage, fail nothing, and complete at the first pass after', async () => {
    proxy.rule = () => ({kind: 'forward'})
    await proxy.up()
    await kit.pair(proxy.url)
    // Few attempts allowed: an outage must not spend them. The lockdown's own retries kept short.
    const engine = await kit.engine({backoff: {max_attempts: 2}, host_reconcile: {lockdown_budget_seconds: 1}})
    const live = await deployed(engine)
    const retiring = await deployed(engine)

    const apply = async (request: ControlRequest) => (await applyControl(engine, {departmentId: live.department, request, actor: ACTOR})).outcome
    // The host applies the mutation; its answer is lost on the way back.
    proxy.rule = ({method}) => (method === 'PUT' ? {kind: 'forward_then_cut'} : {kind: 'forward'})
    expect(await apply({operation: 'secrets.put', name: 'TOKEN', value: SECRET_VALUE})).toMatchObject({state: 'pending'})
    expect(await apply({operation: 'access_policy.replace', mode: 'teamsync_internal', ipAllowlist: []})).toMatchObject({state: 'pending'})
    // Applied and recorded; the receipt acknowledgement fails.
    proxy.rule = ({url}) => (url.endsWith('/ack') ? {kind: 'answer', status: 503, body: {code: 'internal_error', message: 'proxy'}} : {kind: 'forward'})
    expect(await apply({operation: 'runtime_config.replace', key: 'LIMITS', value: {rps: 5}})).toMatchObject({state: 'completed', acknowledged: false})
    proxy.rule = () => ({kind: 'forward'})

    await proxy.down()
    // The retirement's lockdown cannot reach the host: the department is deleted, the Worker retiring.
    expect(await retireDepartment(engine, {departmentId: retiring.department, actor: ACTOR})).toMatchObject({
      state: 'pending',
      code: 'edge_host_unreachable',
    })
    // The lost answers are read back once the request grace is over: during the outage.
    t.clock.advance(engine.settings.control_audit.request_grace_seconds * 1000)
    let failed = 0
    for (let pass = 0; pass < OUTAGE_PASSES; pass++) {
      if (pass > 0) t.clock.advance(PASS_INTERVAL_MS)
      const summary = await runPass(engine, {lanes: [...LANES]})
      failed += summary.lanes.reduce((sum, lane) => sum + lane.failed + lane.uncertain, 0)
    }
    expect(failed).toBe(0)

    const waiting = await rowsOf(live.department)
    expect(waiting).toHaveLength(3)
    for (const row of waiting) {
      expect(row.status === 'failed', `${row.payload.operation}: ${row.last_error_code}`).toBe(false)
      expect(row.next_attempt_at, row.payload.operation as string).toBeGreaterThan(t.clock.now())
      expect(row.waits, row.payload.operation as string).toBeGreaterThanOrEqual(1)
      expect(row.attempts, row.payload.operation as string).toBeLessThanOrEqual(askedAbout(row))
    }
    // Each waits for its host, under the reason a deploy's row waits under.
    expect(Object.fromEntries(waiting.map((row) => [row.payload.operation, [row.status, row.last_error_code]]))).toEqual({
      'secrets.put': ['pending', 'edge_host_unreachable'],
      'access_policy.replace': ['pending', 'edge_host_unreachable'],
      'runtime_config.replace': ['completed', 'edge_host_unreachable'], // its receipt acknowledgement waits
    })
    expect(await t.store.workers.getByDepartment(retiring.department)).toMatchObject({retired_at: null})

    // `outbox list` shows each waiting row, its waits and its next attempt time.
    const settings = kit.settings()
    const listed = await execa('node', [CLI_BIN, 'outbox', 'list', '--operation', 'control_audit', '--json'], {
      env: {EDGEWORKERS_DATA_DIR: settings.data_dir, EDGEWORKERS_STORE__URL: settings.store.url},
    })
    const shown = (JSON.parse(listed.stdout) as OutboxRow[]).filter((row) => row.department_id === live.department)
    expect(shown.map((row) => ({id: row.id, status: row.status, waits: row.waits, next: row.next_attempt_at}))).toEqual(
      expect.arrayContaining(waiting.map((row) => ({id: row.id, status: row.status, waits: row.waits, next: row.next_attempt_at}))),
    )

    // The host is back: the first pass completes everything, without moving the clock. The lockdown
    // gets its default budget (a wall-clock one: on a loaded machine one second may not cover it).
    await proxy.up()
    const back = await runPass(await kit.engine({backoff: {max_attempts: 2}}), {lanes: [...LANES]})
    expect(back.lanes.reduce((sum, lane) => sum + lane.failed + lane.uncertain, 0)).toBe(0)
    for (const row of await rowsOf(live.department)) {
      const {status, next_attempt_at, last_error_code} = row
      expect({operation: row.payload.operation, status, next_attempt_at, last_error_code}).toEqual({
        operation: row.payload.operation,
        status: 'completed',
        next_attempt_at: null,
        last_error_code: null,
      })
      expect(row.attempts, row.payload.operation as string).toBeLessThanOrEqual(askedAbout(row))
    }
    expect(await statusOf(live.scriptName)).toBe(403) // teamsync_internal with no allowlist: the policy holds
    expect((await t.store.workers.getByDepartment(retiring.department))!.retired_at).not.toBeNull()
  })
})
