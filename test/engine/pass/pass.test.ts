// The pass runner: provider validation first, lane selection and order, one error boundary per
// lane, the per-lane summary line and the rows left for an operator.
import {expect, test} from 'vitest'
import {FileArtifactStore} from '../../../src/artifacts/store.js'
import {sha256Hex} from '../../../src/canonical-json.js'
import {EDGE_HOST_FENCED} from '../../../src/protocol/management-api.js'
import {LANE_NAMES, runPass} from '../../../src/engine/pass/index.js'
import {KitError} from '../../../src/errors.js'
import type {OutboxRow} from '../../../src/store/index.js'
import {describeEachStore} from '../../support/stores.js'
import {enqueueDeployRow, passEngine, recordingDispatch, SCOPE, seedWorker, tempArtifactDir} from './support.js'

describeEachStore('reconcile pass', (t) => {
  test('an invalid provider skips the whole pass with the reference log line; nothing is claimed', async () => {
    const engine = await passEngine(t, {
      resolution: {status: 'invalid', code: 'edge_workers_provider_invalid', message: 'provider.scope onprem:ffffffffffff was never paired'},
    })
    const enqueued = await enqueueDeployRow(engine, await seedWorker(t))
    const dispatch = recordingDispatch()
    const result = await runPass(engine, {dispatchDeploy: dispatch})
    expect(result).toMatchObject({
      status: 'skipped',
      skipped: {code: 'edge_workers_provider_invalid', message: 'provider.scope onprem:ffffffffffff was never paired'},
      lanes: [],
      remaining: null,
    })
    expect(engine.log.messages('warn')).toEqual(['Edge Worker recovery skipped: edge_workers_provider_invalid'])
    expect(dispatch.calls).toEqual([])
    expect(await t.store.outbox.get(enqueued.id)).toEqual(enqueued)
  })

  test('a store that fails before the pass starts is a store_unavailable error', async () => {
    const engine = await passEngine(t, {resolution: async () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:5432'))})
    await expect(runPass(engine)).rejects.toThrow(new KitError('store_unavailable', 'the reconcile pass could not start: connect ECONNREFUSED 127.0.0.1:5432'))
  })

  test('runs every lane once in a fixed order, or only the selected ones; each logs a summary line', async () => {
    const engine = await passEngine(t)
    const all = await runPass(engine, {dispatchDeploy: recordingDispatch()})
    expect(all.status).toBe('ran')
    expect(all.scope).toBe(SCOPE)
    expect(all.lanes.map((lane) => lane.lane)).toEqual([...LANE_NAMES])
    expect(all.lanes.every((lane) => lane.error === undefined)).toBe(true)
    expect(engine.log.messages('info').filter((message) => / pass: claimed=/.test(message))).toEqual([
      expect.stringMatching(/^Edge Worker recovery pass: claimed=0 completed=0 retried=0 failed=0 uncertain=0 skipped=0 duration_ms=\d+$/),
      expect.stringMatching(/^Edge Worker deferred republish pass: claimed=0 /),
      expect.stringMatching(/^Edge Worker artifact cleanup pass: claimed=0 /),
      expect.stringMatching(/^Edge Worker control audit pass: claimed=0 .*\(retired=0 ack_retired=0\)$/),
      expect.stringMatching(/^Edge Worker host reconcile pass: claimed=0 /),
    ])

    const some = await runPass(engine, {lanes: ['host_reconcile', 'recovery']})
    expect(some.lanes.map((lane) => lane.lane)).toEqual(['recovery', 'host_reconcile'])
  })

  test('a lane that throws is reported with the reference wording and the other lanes still run to completion', async () => {
    const root = tempArtifactDir()
    const artifacts = await FileArtifactStore.open(root)
    const engine = await passEngine(t, {artifacts})
    const first = await enqueueDeployRow(engine, await seedWorker(t))
    t.clock.advance(1)
    await enqueueDeployRow(engine, await seedWorker(t))
    const key = await artifacts.put('bundle', Buffer.from('orphan'))
    const intent = await t.store.outbox.enqueue({
      operation: 'artifact_cleanup',
      dedupe_key: 'artifact-cleanup:v:bundle',
      dispatch_namespace: SCOPE,
      payload: {kind: 'bundle', object_key: key, digest: sha256Hex('orphan')},
    })
    const fence = await t.store.kit.beginFence({scope: SCOPE, reason: 'backup', ttlSeconds: 60})
    const deferredRow = await enqueueDeployRow(engine, await seedWorker(t))
    await t.store.kit.endFence(fence.id, 'done')
    expect(deferredRow.last_error_code).toBe(EDGE_HOST_FENCED)

    const dispatch = recordingDispatch((args) => {
      if (args.outboxId === first.id) throw new Error('connection terminated unexpectedly')
      return {outcome: 'completed', versionId: 'v', releaseGeneration: 'rg', scriptName: 's', reconciled: false}
    })
    const result = await runPass(engine, {dispatchDeploy: dispatch})
    const [recovery, deferred, cleanup, control, host] = result.lanes
    // The recovery lane stopped at the error and handed the failed row back; the other one ran beside it.
    expect(recovery).toMatchObject({lane: 'recovery', claimed: 2, completed: 1, skipped: 1, error: 'connection terminated unexpectedly'})
    expect(deferred).toMatchObject({lane: 'deferred', claimed: 1, completed: 1})
    expect(deferred!.error).toBeUndefined()
    expect(cleanup).toMatchObject({lane: 'artifact_cleanup', claimed: 1, completed: 1})
    expect(control).toMatchObject({lane: 'control_audit', claimed: 0})
    expect(host).toMatchObject({lane: 'host_reconcile'})
    expect(host!.error).toBeUndefined()
    expect(engine.log.messages('warn')).toContain('Edge Worker recovery failed: connection terminated unexpectedly')
    expect(await t.store.outbox.get(intent.row.id)).toMatchObject({status: 'completed'})
  })

  test('a store that goes away mid-pass ends each lane with an error; the pass still reports', async () => {
    const store = await t.open()
    const engine = await passEngine(t)
    const onItsOwnConnection = {...engine, store}
    await enqueueDeployRow(engine, await seedWorker(t))
    const result = await runPass(onItsOwnConnection, {
      dispatchDeploy: async () => {
        await store.close()
        throw new Error('the store connection was closed')
      },
    })
    expect(result.status).toBe('ran')
    expect(result.lanes.map((lane) => [lane.lane, lane.error !== undefined])).toEqual([
      ['recovery', true],
      ['deferred', true],
      ['artifact_cleanup', true],
      ['control_audit', true],
      ['host_reconcile', true],
    ])
    expect(result.remaining).toBeNull()
  })

  test('every claimed row ends in exactly one count', async () => {
    const engine = await passEngine(t, {settings: {recovery: {batch_size: 3}}})
    for (let i = 0; i < 7; i++) await enqueueDeployRow(engine, await seedWorker(t))
    let n = 0
    const outcomes = ['completed', 'failed', 'uncertain', 'retry', 'skipped'] as const
    const result = await runPass(engine, {
      lanes: ['recovery'],
      dispatchDeploy: recordingDispatch(() => {
        const outcome = outcomes[n++ % outcomes.length]!
        if (outcome === 'retry') return {outcome, code: 'edge_host_5xx', message: '503', exhausted: false}
        if (outcome === 'skipped') return {outcome, disposition: 'inflight'}
        if (outcome === 'completed') return {outcome, versionId: 'v', releaseGeneration: 'rg', scriptName: 's', reconciled: false}
        return {outcome, code: `deploy_${outcome}`, message: outcome}
      }),
    })
    const lane = result.lanes[0]!
    expect(lane).toMatchObject({claimed: 7, completed: 2, failed: 2, uncertain: 1, retried: 1, skipped: 1})
    expect(lane.completed + lane.failed + lane.uncertain + lane.retried + lane.skipped).toBe(lane.claimed)
  })

  test('reports the rows of the swept lanes left failed or uncertain in its scope', async () => {
    const engine = await passEngine(t)
    const settled = async (operation: OutboxRow['operation'], status: string, scope = SCOPE) => {
      const {row} = await t.store.outbox.enqueue({
        operation,
        dedupe_key: `${operation}:${status}:${scope}:${Math.random()}`,
        dispatch_namespace: scope,
        payload: {},
        next_attempt_at: null,
      })
      await t.exec(`update edge_worker_outbox set status = '${status}' where id = '${row.id}'`)
    }
    await settled('deploy', 'failed')
    await settled('deploy', 'uncertain')
    await settled('deploy', 'uncertain')
    await settled('deploy', 'failed', 'onprem:ba9876543210')
    await settled('artifact_cleanup', 'failed')
    await settled('control_audit', 'failed')

    expect((await runPass(engine, {lanes: ['recovery']})).remaining).toEqual({failed: 1, uncertain: 2})
    expect((await runPass(engine, {lanes: ['artifact_cleanup']})).remaining).toEqual({failed: 1, uncertain: 0})
    expect((await runPass(engine, {lanes: ['control_audit']})).remaining).toEqual({failed: 1, uncertain: 0})
    expect((await runPass(engine)).remaining).toEqual({failed: 3, uncertain: 2})
    expect((await runPass(engine, {lanes: ['host_reconcile']})).remaining).toEqual({failed: 0, uncertain: 0})
  })

  test('reports the deploys it could not take yet (a waiting deploy within its grace, a backoff) and when the first is due', async () => {
    const engine = await passEngine(t)
    const nothing = await runPass(engine, {lanes: ['recovery'], dispatchDeploy: recordingDispatch()})
    expect(nothing.waiting).toEqual({deploys: 0, nextDueInMs: null})

    // A waiting `deploy` reserved this row: the sweep leaves it alone for the dispatch grace.
    await enqueueDeployRow(engine, await seedWorker(t), 'another-runner')
    t.clock.advance(1_000)
    const reserved = await runPass(engine, {lanes: ['recovery'], dispatchDeploy: recordingDispatch()})
    expect(reserved.lanes[0]!.claimed).toBe(0)
    expect(reserved.waiting).toEqual({deploys: 1, nextDueInMs: engine.settings.recovery.dispatch_grace_seconds * 1000 - 1_000})

    // A failed attempt backs off: due at its next_attempt_at.
    const {row} = await t.store.outbox.enqueue({
      operation: 'deploy',
      dedupe_key: `waiting:${Math.random()}`,
      dispatch_namespace: SCOPE,
      payload: {},
      next_attempt_at: t.clock.now() + 12_000,
    })
    const backedOff = await runPass(engine, {lanes: ['recovery'], dispatchDeploy: recordingDispatch()})
    expect(backedOff.waiting).toEqual({deploys: 2, nextDueInMs: 12_000})
    expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'pending'})

    expect((await runPass(engine, {lanes: ['artifact_cleanup']})).waiting).toBeNull()
  })
})
