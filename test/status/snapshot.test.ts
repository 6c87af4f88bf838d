// The engine side of `edgeworkers status` on both backends, against a real edge host: the snapshot
// (store part, host health, gates, what needs attention), the operator actions and their audit rows,
// and the redaction of everything secret-bearing the view prints.
import net from 'node:net'
import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {cancelOutboxRow, outboxRowDetail, retryOutboxRow, runLaneOnce} from '../../src/engine/status/actions.js'
import {REDACTED} from '../../src/util/redact.js'
import {takeSnapshot} from '../../src/engine/status/snapshot.js'
import {KitError} from '../../src/errors.js'
import type {JsonObject, OutboxRow} from '../../src/store/index.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore, type StoreHarness} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const OPERATOR = {type: 'operator', id: 'alice'}
const SECRET_PAYLOAD: JsonObject = {
  apiKey: 'sk-live-0123456789',
  nested: {password: 'hunter2', passwordDigest: 'ab'.repeat(32), note: 'kept'},
  list: [{token: 'tok-1'}, {name: 'n'}],
  store: 'postgres://kit:s3cret@db.internal:5432/edgeworkers',
}

/** An address nothing listens on: connections to it are refused at once. */
async function refusingUrl(): Promise<string> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return `http://127.0.0.1:${port}`
}

/** A row of `scope` settled `status` with `code`, as a lane would leave it. */
async function settledRow(
  t: StoreHarness,
  scope: string,
  status: 'failed' | 'uncertain',
  code: string,
  operation: OutboxRow['operation'] = 'deploy',
): Promise<OutboxRow> {
  const {row} = await t.store.outbox.enqueue({operation, dedupe_key: `snapshot-test:${Math.random()}`, dispatch_namespace: scope, payload: {}})
  const leased = await t.store.outbox.leaseById(row.id, {scope, owner: 'runner', leaseSeconds: 60})
  await t.store.outbox.settle(row.id, leased.row!.lease_token!, {status, errorCode: code, error: `because ${code}`, attempted: true})
  return (await t.store.outbox.get(row.id))!
}

describeEachStore('status snapshot', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost()
  })
  afterAll(async () => {
    await host?.stop()
  })

  const engineOf = (): Promise<Engine> => createEngine(t.store, kit.settings(), onPremHosts)

  test('unpaired: the store part still shows, the host part says why, and both need attention', async () => {
    await settledRow(t, 'onprem:0123456789ab', 'failed', 'edge_host_5xx')
    const snapshot = await takeSnapshot(await engineOf())
    expect(snapshot.scope).toBeNull()
    expect(snapshot.host).toMatchObject({paired: false, reachable: false, ready: null})
    expect(snapshot.host.problem).toMatch(/not paired with an edge host/)
    expect(snapshot.lanes.find((lane) => lane.operation === 'deploy')).toMatchObject({failed: 1})
    expect(snapshot.errorGroups).toMatchObject([{status: 'failed', operation: 'deploy', last_error_code: 'edge_host_5xx', count: 1}])
    expect(snapshot.orphans).toBeNull()
    expect(snapshot.attention).toEqual(['1 failed outbox row', expect.stringMatching(/^no usable edge host: the store is not paired/)])
  })

  test('a live host: reachable, ready, every shard up, its scripts counted; a deployed Worker needs no attention', async () => {
    await kit.pair()
    const engine = await engineOf()
    const department = await kit.department()
    const deployed = await deployWorker(engine, {projectDir: path.join(FIXTURES_DIR, 'hello'), departmentId: department, wait: true})
    expect(deployed.state).toBe('completed')

    const snapshot = await takeSnapshot(engine)
    expect(snapshot.scope).toMatch(/^onprem:[0-9a-f]{12}$/)
    expect(snapshot.host).toMatchObject({paired: true, reachable: true, ready: true, shardsUp: 2, error: null})
    expect(snapshot.host.scripts!.active).toBeGreaterThanOrEqual(1)
    expect(snapshot.lanes.find((lane) => lane.operation === 'deploy')).toMatchObject({completed: 1, failed: 0, pending: 0})
    expect(snapshot.fence).toBeNull()
    expect(snapshot.maintenance).toEqual({on: false, reason: null})
    expect(snapshot.attention).toEqual([])
    expect(snapshot.orphans).toEqual({pending: 0, unsettled: 0, workers: []})
  })

  test('host down: the store part still shows, the host part says why; a fence open past its TTL and maintenance show', async () => {
    const {scope} = await kit.pair(await refusingUrl())
    await t.store.kit.beginFence({scope, reason: 'nightly backup', ttlSeconds: 60})
    await t.store.kit.setGate(scope, 'maintenance', 'upgrading PostgreSQL')
    await settledRow(t, scope, 'uncertain', 'worker_readiness_timeout')
    t.clock.advance(125_000)

    const snapshot = await takeSnapshot(await engineOf())
    expect(snapshot.host).toMatchObject({paired: true, reachable: false, ready: null, shards: null})
    expect(snapshot.host.error).toMatch(/edge host unreachable \(ECONNREFUSED\)/)
    expect(snapshot.fence).toMatchObject({state: 'requested', reason: 'nightly backup', overdue: true, timeLeftMs: -65_000})
    expect(snapshot.maintenance).toEqual({on: true, reason: 'upgrading PostgreSQL'})
    expect(snapshot.lanes.find((lane) => lane.operation === 'deploy')).toMatchObject({uncertain: 1})
    expect(snapshot.attention).toEqual([
      '1 uncertain outbox row',
      expect.stringMatching(/^edge host unreachable: .*ECONNREFUSED/),
      expect.stringMatching(/^backup fence [0-9a-f-]{36} is overdue: still open 1m05s past its TTL$/),
    ])
  })

  test('retry and cancel act as the operator and write one audit row each; a deploy retry is refused while maintenance is on', async () => {
    const {scope} = await kit.pair(await refusingUrl())
    const engine = await engineOf()
    const failed = await settledRow(t, scope, 'failed', 'edge_host_5xx')
    const cleanup = await settledRow(t, scope, 'uncertain', 'artifact_read_failed', 'artifact_cleanup')

    expect((await retryOutboxRow(engine, failed.id, OPERATOR)).message).toBe(`outbox row ${failed.id} is pending and due now; the next pass dispatches it`)
    expect(await t.store.outbox.get(failed.id)).toMatchObject({status: 'pending'})
    const [retried] = await t.store.audit.list({action: 'outbox_row.retried'})
    expect(retried).toMatchObject({
      resource_type: 'outbox_row',
      resource_id: failed.id,
      actor_type: 'operator',
      actor_id: 'alice',
      auth_method: 'cli',
      reason_code: 'edge_host_5xx',
      facts: {operation: 'deploy', previous_status: 'failed', status: 'pending', scope, attempts: 1, script_name: null},
    })

    expect((await cancelOutboxRow(engine, cleanup.id, OPERATOR)).message).toBe(`outbox row ${cleanup.id} cancelled (was uncertain); no lane takes it again`)
    expect(await t.store.audit.list({action: 'outbox_row.cancelled'})).toMatchObject([
      {resource_id: cleanup.id, facts: {previous_status: 'uncertain', status: 'cancelled'}},
    ])
    // Cancelling it again is refused and writes nothing.
    await expect(cancelOutboxRow(engine, cleanup.id, OPERATOR)).rejects.toThrow(`cannot cancel outbox row ${cleanup.id}: it is already cancelled`)
    expect(await t.store.audit.list({action: 'outbox_row.cancelled'})).toHaveLength(1)

    const uncertain = await settledRow(t, scope, 'uncertain', 'worker_readiness_timeout')
    await t.store.kit.setGate(scope, 'maintenance', 'upgrading')
    const refused = await retryOutboxRow(engine, uncertain.id, OPERATOR).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(KitError)
    expect((refused as KitError).message).toMatch(/^409 edge_workers_maintenance/)
    expect(await t.store.outbox.get(uncertain.id)).toMatchObject({status: 'uncertain'})

    const leased = await t.store.outbox.enqueue({operation: 'artifact_cleanup', dedupe_key: 'leased', dispatch_namespace: scope, payload: {}})
    await t.store.outbox.leaseById(leased.row.id, {scope, owner: 'host-b:42:abcd', leaseSeconds: 90})
    await expect(retryOutboxRow(engine, leased.row.id, OPERATOR)).rejects.toThrow(
      `cannot retry outbox row ${leased.row.id}: host-b:42:abcd holds its lease for 1m30s more`,
    )

    expect((await runLaneOnce(engine, 'artifact_cleanup')).message).toMatch(
      /^artifact cleanup pass: claimed 0, completed 0, retried 0, failed 0, uncertain 0, skipped 0 in \d+ ms$/,
    )
  })

  test('row details and audit facts show every secret-bearing field redacted, digests kept, no lease token', async () => {
    const {scope} = await kit.pair(await refusingUrl())
    const engine = await engineOf()
    const {row} = await t.store.outbox.enqueue({operation: 'control_audit', dedupe_key: 'secrets', dispatch_namespace: scope, payload: SECRET_PAYLOAD})
    await t.store.outbox.leaseById(row.id, {scope, owner: 'runner', leaseSeconds: 60})
    await t.store.audit.append({
      id: 'audit-with-secrets',
      action: 'secrets.put',
      resource_type: 'edge_worker',
      resource_id: 'w',
      actor_type: 'system',
      actor_id: '',
      auth_method: 'system',
      result: 'success',
      facts: SECRET_PAYLOAD,
    })
    const expected = {
      apiKey: REDACTED,
      nested: {password: REDACTED, passwordDigest: 'ab'.repeat(32), note: 'kept'},
      list: [{token: REDACTED}, {name: 'n'}],
      store: 'postgres://kit@db.internal:5432/edgeworkers',
    }
    const detail = await outboxRowDetail(engine, row.id)
    expect(detail?.payload).toEqual(expected)
    expect(detail).not.toHaveProperty('lease_token')
    expect(detail?.lease_owner).toBe('runner')
    const snapshot = await takeSnapshot(engine)
    expect(snapshot.audit.find((entry) => entry.id === 'audit-with-secrets')?.facts).toEqual(expected)
    expect(JSON.stringify(snapshot)).not.toMatch(/hunter2|sk-live|tok-1|s3cret/)
  })
})
