// A backlog's older deploy rows yield a claim batch at a time: the rows of a claim whose Worker has a
// newer deploy queued or deployed settle `cancelled`/`deploy_superseded` in one transaction, each
// with its one audit row, without the deploy task; only rows the claim's lease still holds, never
// the newest; a Worker is rested only for a row whose deploy was under way; a failure half-way
// changes nothing and the next pass converges.
import {expect, test} from 'vitest'
import {runPass, type PassResult} from '../../../src/engine/pass/index.js'
import {DEPLOY_AUDIT_ACTIONS, type OutboxRow, type VersionRow, type WorkerRow} from '../../../src/store/index.js'
import {describeEachStore, type StoreHarness} from '../../support/stores.js'
import {enqueueDeployRow, passEngine, recordingDispatch, SCOPE, seedWorker, type TestEngine} from './support.js'

const laneOf = (result: PassResult) => result.lanes[0]!

describeEachStore('superseded rows settle a claim at a time', (t) => {
  /** `workers` Workers with `versions` versions each, a deploy row per version, enqueued version by version (oldest first). */
  async function backlog(engine: TestEngine, workers: number, versions: number): Promise<{worker: WorkerRow; versions: VersionRow[]; rows: OutboxRow[]}[]> {
    const seeds = await Promise.all(Array.from({length: workers}, async () => ({...(await seedWorker(t)), rows: [] as OutboxRow[]})))
    const all = seeds.map((seed) => ({worker: seed.worker, versions: [seed.version], rows: seed.rows}))
    for (let v = 0; v < versions; v++) {
      for (const entry of all) {
        if (v > 0)
          entry.versions.push(await t.store.workers.createVersion({...versionInput(entry.versions[0]!), release_generation: `${entry.worker.id}-v${v}`}))
        entry.rows.push(await enqueueDeployRow(engine, {worker: entry.worker, version: entry.versions[v]!}))
        t.clock.advance(1)
      }
    }
    return all
  }

  const supersededAudits = async () => (await t.store.audit.list({})).filter((row) => row.action === DEPLOY_AUDIT_ACTIONS.superseded)

  test('the older rows settle deploy_superseded without the task, one audit row each with the facts the task writes; the newest run', async () => {
    const engine = await passEngine(t, {settings: {recovery: {batch_size: 50}}})
    const seeds = await backlog(engine, 3, 3)
    const dispatch = recordingDispatch()
    expect(laneOf(await runPass(engine, {lanes: ['recovery'], dispatchDeploy: dispatch}))).toMatchObject({claimed: 9, completed: 9, skipped: 0})

    // Only each Worker's newest row reached the task.
    expect(dispatch.calls.map((call) => call.outboxId).sort()).toEqual(seeds.map((seed) => seed.rows[2]!.id).sort())
    const audits = await supersededAudits()
    for (const seed of seeds) {
      for (const [v, enqueued] of seed.rows.slice(0, 2).entries()) {
        const message = `version ${seed.versions[2]!.id} of the Worker is newer; this deploy yields to it`
        // Settled under the claim's lease, the lease ended; the host was never asked (no attempt).
        expect(await t.store.outbox.get(enqueued.id)).toMatchObject({
          status: 'cancelled',
          last_error_code: 'deploy_superseded',
          last_error: message,
          attempts: 0,
          lease_token: null,
        })
        expect(await t.store.workers.getVersion(seed.versions[v]!.id)).toMatchObject({state: 'superseded'})
        const own = audits.filter((audit) => audit.facts.outbox_id === enqueued.id)
        expect(own).toHaveLength(1)
        expect(own[0]).toMatchObject({result: 'cancelled', reason_code: 'deploy_superseded', resource_id: seed.worker.id})
        expect(own[0]!.facts).toEqual({
          outbox_id: enqueued.id,
          script_name: seed.worker.script_name,
          version_id: seed.versions[v]!.id,
          release_generation: seed.versions[v]!.release_generation,
          newer_version_id: seed.versions[2]!.id,
        })
      }
      expect(await t.store.outbox.get(seed.rows[2]!.id)).toMatchObject({status: 'completed'})
      expect(await t.store.workers.get(seed.worker.id)).toMatchObject({status: 'new'})
    }
    expect(audits).toHaveLength(6)
    expect(engine.log.messages('info').filter((message) => message.startsWith('Edge Worker deployment superseded: '))).toHaveLength(6)
  })

  test('a newer row that failed or was cancelled does not count: the older row still runs', async () => {
    const engine = await passEngine(t)
    const [seed] = await backlog(engine, 1, 2)
    await t.exec(`update edge_worker_outbox set status = 'failed', next_attempt_at = null where id = '${seed!.rows[1]!.id}'`)
    const dispatch = recordingDispatch()
    expect(laneOf(await runPass(engine, {lanes: ['recovery'], dispatchDeploy: dispatch}))).toMatchObject({claimed: 1, completed: 1})
    expect(dispatch.calls.map((call) => call.outboxId)).toEqual([seed!.rows[0]!.id])
    expect(await supersededAudits()).toEqual([])
  })

  test('a yield rests the Worker only when its own deploy was under way (a dead runner paused it); otherwise the Worker is left as it is', async () => {
    const engine = await passEngine(t)
    const [died, idle] = await backlog(engine, 2, 2)
    // The first Worker's older deploy died mid-deploy: its version deploying, the Worker paused by it.
    await t.exec(`update edge_worker_versions set state = 'deploying' where id = '${died!.versions[0]!.id}'`)
    await t.exec(`update edge_workers set status = 'paused' where id = '${died!.worker.id}'`)
    // The second Worker is paused by something else this yield knows nothing of.
    await t.exec(`update edge_workers set status = 'paused' where id = '${idle!.worker.id}'`)
    const dispatch = recordingDispatch()
    expect(laneOf(await runPass(engine, {lanes: ['recovery'], dispatchDeploy: dispatch}))).toMatchObject({claimed: 4, completed: 4})
    expect(dispatch.calls.map((call) => call.outboxId).sort()).toEqual([died!.rows[1]!.id, idle!.rows[1]!.id].sort())
    expect(await t.store.workers.getVersion(died!.versions[0]!.id)).toMatchObject({state: 'superseded'})
    expect(await t.store.workers.get(died!.worker.id)).toMatchObject({status: 'new'})
    expect(await t.store.workers.get(idle!.worker.id)).toMatchObject({status: 'paused'})
  })

  test('a row whose claim lost its lease (handed back, or taken over) is left untouched', async () => {
    const engine = await passEngine(t)
    const [seed] = await backlog(engine, 1, 3)
    const claimed = await t.store.sweeps.claimRecoverableDeployments({scope: SCOPE, owner: 'claimer', limit: 10, graceSeconds: 0, leaseSeconds: 90})
    const [oldest, middle] = claimed
    // The oldest row was handed back; the middle one's lease ran out and another claim took it over.
    expect(await t.store.sweeps.releaseLease(oldest!.id, oldest!.lease_token!)).toBe(true)
    await t.exec(`update edge_worker_outbox set lease_token = 'taken-over' where id = '${middle!.id}'`)
    const before = [await t.store.outbox.get(oldest!.id), await t.store.outbox.get(middle!.id)]

    expect(await t.store.sweeps.supersedeLeased(claimed.map((row) => ({lease: {id: row.id, token: row.lease_token!}, versionId: row.version_id})))).toEqual([])
    expect([await t.store.outbox.get(oldest!.id), await t.store.outbox.get(middle!.id)]).toEqual(before)
    expect(await supersededAudits()).toEqual([])
    // The newest row yields to nothing: it stays the claim's, for its task.
    expect(await t.store.outbox.get(seed!.rows[2]!.id)).toMatchObject({status: 'leased', lease_owner: 'claimer', lease_token: claimed[2]!.lease_token})
  })

  test('a failure half-way through the batch changes nothing (one transaction); the next pass settles every row once', async () => {
    const engine = await passEngine(t)
    const seeds = await backlog(engine, 2, 3)
    // The audit row of the second Worker's oldest row cannot be written: the batch's transaction fails there.
    const blocked = seeds[1]!.rows[0]!.id
    await installAuditFailure(t, blocked)
    try {
      const failed = laneOf(await runPass(engine, {lanes: ['recovery'], dispatchDeploy: recordingDispatch()}))
      expect(failed.error).toMatch(/injected audit failure/)
      expect(await supersededAudits()).toEqual([])
      for (const seed of seeds) {
        for (const enqueued of seed.rows.slice(0, 2)) expect((await t.store.outbox.get(enqueued.id))!.status).toBe('pending')
        for (const version of seed.versions) expect((await t.store.workers.getVersion(version.id))!.state).toBe('built')
      }
    } finally {
      await removeAuditFailure(t)
    }
    t.clock.advance(3_600_000)
    const dispatch = recordingDispatch()
    expect(laneOf(await runPass(engine, {lanes: ['recovery'], dispatchDeploy: dispatch}))).toMatchObject({completed: 6, skipped: 0})
    const audits = await supersededAudits()
    expect(audits.map((audit) => audit.facts.outbox_id).sort()).toEqual(seeds.flatMap((seed) => seed.rows.slice(0, 2).map((row) => row.id)).sort())
    expect(dispatch.calls.map((call) => call.outboxId).sort()).toEqual(seeds.map((seed) => seed.rows[2]!.id).sort())
  })
})

function versionInput(version: VersionRow) {
  const {id: _id, created_at: _created, updated_at: _updated, state: _state, ...input} = version
  return input
}

/** A trigger that makes inserting the audit row of `outboxId`'s yield fail (raw SQL: a store failure mid-transaction). */
async function installAuditFailure(t: StoreHarness, outboxId: string): Promise<void> {
  if (t.backend === 'sqlite') {
    await t.exec(`create trigger fail_audit before insert on edge_worker_audit_logs when new.facts like '%${outboxId}%'
      begin select raise(abort, 'injected audit failure'); end`)
    return
  }
  await t.exec(`create function fail_audit() returns trigger language plpgsql as $$
    begin if new.facts like '%${outboxId}%' then raise exception 'injected audit failure'; end if; return new; end $$`)
  await t.exec('create trigger fail_audit before insert on edge_worker_audit_logs for each row execute function fail_audit()')
}

async function removeAuditFailure(t: StoreHarness): Promise<void> {
  await t.exec(`drop trigger if exists fail_audit${t.backend === 'postgres' ? ' on edge_worker_audit_logs' : ''}`)
  if (t.backend === 'postgres') await t.exec('drop function if exists fail_audit()')
}
