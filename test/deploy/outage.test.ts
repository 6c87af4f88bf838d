// Host outages and killed passes do not burn deploys (docs/scheduling.md "Attempts and waits"): an
// attempt counts only when the host was asked, a host that cannot serve a deploy is waited for on
// the backoff ladder and never fails it, the row completes at the first pass after the host is back,
// and only an answer saying the deploy itself is bad fails it. Real host, real workerd, both stores;
// the host goes down behind a proxy (its port refuses connections) or answers 5xx/4xx through it.
import path from 'node:path'
import {execa} from 'execa'
import {afterAll, beforeAll, beforeEach, expect, test} from 'vitest'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {enqueueDeploy} from '../../src/engine/deploy/enqueue.js'
import {submitVersion} from '../../src/engine/deploy/submit.js'
import {runPass} from '../../src/engine/pass/run-pass.js'
import {openStore} from '../../src/store/index.js'
import {CLI_BIN} from '../support/cli.js'
import {FaultProxy} from '../support/fault-proxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const HELLO = path.join(FIXTURES_DIR, 'hello')
const LEASE_MS = 90_000
/** Cron's cadence: one pass a minute. */
const PASS_INTERVAL_MS = 60_000

describeEachStore('deploys through host outages and killed passes', (t) => {
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
    await proxy.up() // a test that failed mid-outage leaves it down
    await kit.pair(proxy.url)
  })

  /** A `deploy --no-wait`: built, committed and queued for the passes. */
  async function queuedDeploy(engine: Engine) {
    const resolution = await engine.resolveProvider()
    if (resolution.status !== 'ready') throw new Error(`provider not ready: ${resolution.message}`)
    const {worker, version} = await submitVersion(engine, {projectDir: HELLO, departmentId: await kit.department(), scope: resolution.scope})
    const {row} = await enqueueDeploy(engine, {worker, version, scope: resolution.scope})
    return {scope: resolution.scope, worker, version, row}
  }
  /** Requests that reached the host for this script (through the proxy), and uploads among them. */
  const asked = (scriptName: string) => proxy.seen.filter((seen) => seen.url.includes(scriptName))
  const uploads = (scriptName: string) => asked(scriptName).filter((seen) => seen.method === 'PUT')
  const recoveryPass = async (engine: Engine) => (await runPass(engine, {lanes: ['recovery']})).lanes[0]!

  test('20 passes that died after claiming the row spend no attempts; a host outage after them does not fail it', async () => {
    const engine = await kit.engine()
    const {scope, worker, row} = await queuedDeploy(engine)
    for (let pass = 0; pass < 20; pass++) {
      const claimed = await t.store.sweeps.claimRecoverableDeployments({scope, owner: `killed-pass-${pass}`, limit: 50, graceSeconds: 300, leaseSeconds: 90})
      expect(claimed.map((claimedRow) => claimedRow.id)).toEqual([row.id])
      t.clock.advance(LEASE_MS) // the pass died holding it: its lease runs out
    }
    expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'leased', attempts: 0})

    await proxy.down()
    expect(await recoveryPass(engine)).toMatchObject({claimed: 1, retried: 1, failed: 0})
    expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'pending', attempts: 0, waits: 1, last_error_code: 'edge_host_unreachable'})

    await proxy.up()
    t.clock.advance(PASS_INTERVAL_MS)
    expect(await recoveryPass(engine)).toMatchObject({claimed: 1, completed: 1, failed: 0})
    const settled = await t.store.outbox.get(row.id)
    expect(settled).toMatchObject({status: 'completed', attempts: 1})
    expect(settled!.attempts).toBeLessThanOrEqual(uploads(worker.script_name).length)
  })

  test('passes killed -9 right after they leased the row spend no attempts', async () => {
    const engine = await kit.engine()
    const {worker, row} = await queuedDeploy(engine)
    const settings = kit.settings()
    for (let kill = 0; kill < 3; kill++) {
      const killed = await execa('node', [CLI_BIN, 'reconcile', '--lane', 'recovery'], {
        reject: false,
        env: {EDGEWORKERS_DATA_DIR: settings.data_dir, EDGEWORKERS_STORE__URL: settings.store.url, EDGEWORKERS_FAULT: 'deploy.after_lease'},
      })
      expect(killed.signal).toBe('SIGKILL')
      expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'leased', attempts: 0})
      // The killed pass ran on the wall clock: its lease runs out (set, instead of waiting 90 s).
      await t.exec(`update edge_worker_outbox set lease_expires_at = ${Date.now() - 1} where id = '${row.id}'`)
    }
    expect(uploads(worker.script_name)).toHaveLength(0)

    // The next pass, on the wall clock as the killed ones, completes it with one attempt.
    const store = await openStore(settings)
    try {
      expect((await runPass(await createEngine(store, settings, onPremHosts), {lanes: ['recovery']})).lanes[0]).toMatchObject({claimed: 1, completed: 1})
      expect(await store.outbox.get(row.id)).toMatchObject({status: 'completed', attempts: 1})
    } finally {
      await store.close()
    }
  })

  test('a host down across 10 passes: nothing fails, the row waits with its next attempt time and reason, and completes at the first pass after the host is back', async () => {
    // Few attempts allowed: an outage must not spend them.
    const engine = await kit.engine({backoff: {max_attempts: 2}})
    const {worker, row} = await queuedDeploy(engine)
    await proxy.down()
    let failed = 0
    for (let pass = 0; pass < 10; pass++) {
      const lane = await recoveryPass(engine)
      failed += lane.failed + lane.uncertain
      t.clock.advance(PASS_INTERVAL_MS)
    }
    expect(failed).toBe(0)
    const waiting = await t.store.outbox.get(row.id)
    expect(waiting).toMatchObject({status: 'pending', attempts: 0, last_error_code: 'edge_host_unreachable'})
    expect(waiting!.waits).toBeGreaterThanOrEqual(4)
    expect(waiting!.next_attempt_at!).toBeGreaterThan(t.clock.now())
    // The pass says what waits and when the first of it is due.
    expect((await runPass(engine, {lanes: ['recovery']})).waiting).toMatchObject({deploys: 1, nextDueInMs: waiting!.next_attempt_at! - t.clock.now()})

    await proxy.up()
    expect(await recoveryPass(engine)).toMatchObject({claimed: 1, completed: 1})
    const settled = await t.store.outbox.get(row.id)
    expect(settled).toMatchObject({status: 'completed', attempts: 1})
    expect(settled!.attempts).toBeLessThanOrEqual(uploads(worker.script_name).length)
  })

  test('a host answering 5xx across 10 passes: each answer is an attempt, none fails the deploy, and it completes once the host serves', async () => {
    const engine = await kit.engine({backoff: {max_attempts: 2}})
    const {worker, row} = await queuedDeploy(engine)
    proxy.rule = ({method}) => (method === 'PUT' ? {kind: 'answer', status: 503, body: {code: 'unavailable', message: 'try later'}} : {kind: 'forward'})
    let failed = 0
    for (let pass = 0; pass < 10; pass++) {
      const lane = await recoveryPass(engine)
      failed += lane.failed + lane.uncertain
      t.clock.advance(PASS_INTERVAL_MS)
    }
    expect(failed).toBe(0)
    const waiting = await t.store.outbox.get(row.id)
    expect(waiting).toMatchObject({status: 'pending', last_error_code: 'edge_host_5xx'})
    // Asked on the backoff ladder, not at every pass; every answer counted once.
    expect(waiting!.attempts).toBe(uploads(worker.script_name).length)
    expect(waiting!.attempts).toBeGreaterThanOrEqual(3)
    expect(waiting!.attempts).toBeLessThan(10)

    proxy.rule = () => ({kind: 'forward'})
    t.clock.advance(waiting!.next_attempt_at! - t.clock.now())
    expect(await recoveryPass(engine)).toMatchObject({claimed: 1, completed: 1})
    expect((await t.store.outbox.get(row.id))!.attempts).toBe(uploads(worker.script_name).length)
  })

  test('a 4xx refusal of the upload still fails the deploy at once', async () => {
    const engine = await kit.engine()
    const {worker, row} = await queuedDeploy(engine)
    proxy.rule = ({method}) =>
      method === 'PUT' ? {kind: 'answer', status: 400, body: {code: 'invalid_request', message: 'the module is not valid'}} : {kind: 'forward'}
    expect(await recoveryPass(engine)).toMatchObject({claimed: 1, failed: 1})
    expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'failed', attempts: 1})
    expect(uploads(worker.script_name)).toHaveLength(1)
  })
})
