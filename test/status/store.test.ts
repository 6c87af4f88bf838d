// The store side of `edgeworkers status` on both backends: the refresh queries (counts, due ages,
// leased rows, failures by error code, pending orphans) and the operator's retry and cancel, which
// follow the outbox lease rules.
import {expect, test} from 'vitest'
import {
  controlAuditDedupeKey,
  newId,
  ORPHAN_CONFIRMATION_ACTION,
  scriptNameFor,
  type OutboxEnqueueInput,
  type OutboxRow,
  type Store,
} from '../../src/store/index.js'
import {describeEachStore, type StoreHarness} from '../support/stores.js'

const SCOPE = 'onprem:0123456789ab'
const OTHER_SCOPE = 'onprem:ba9876543210'
const LEASE_MS = 60_000
const DAY_MS = 86_400_000

let keys = 0
function row(overrides: Partial<OutboxEnqueueInput> = {}): OutboxEnqueueInput {
  return {operation: 'deploy', dedupe_key: `status-test:${++keys}`, dispatch_namespace: SCOPE, payload: {n: keys}, ...overrides}
}

/** Leases the row by id (as the deploy task does) and returns its token. */
async function lease(store: Store, id: string, owner = 'runner-a'): Promise<string> {
  const scope = (await store.outbox.get(id))!.dispatch_namespace
  const leased = await store.outbox.leaseById(id, {scope, owner, leaseSeconds: LEASE_MS / 1000})
  expect(leased.disposition).toBe('acquired')
  return leased.row!.lease_token!
}

/** A row taken to `status` the way the lanes do it. */
async function rowIn(t: StoreHarness, status: OutboxRow['status'], overrides: Partial<OutboxEnqueueInput> & {errorCode?: string} = {}): Promise<OutboxRow> {
  const {errorCode, ...input} = overrides
  if (status === 'pending' || status === 'deferred') return (await t.store.outbox.enqueue(row({...input, status}))).row
  const {row: created} = await t.store.outbox.enqueue(row(input))
  const token = await lease(t.store, created.id)
  if (status !== 'leased') {
    if (status === 'cancelled') {
      await t.store.outbox.settle(created.id, token, {status: 'failed'})
      await t.store.outbox.cancel(created.id, {scope: null})
    } else {
      // As a lane settles a row once it asked the host: one attempt.
      await t.store.outbox.settle(created.id, token, {status, errorCode: errorCode ?? null, error: errorCode ? `because ${errorCode}` : null, attempted: true})
    }
  }
  return (await t.store.outbox.get(created.id))!
}

describeEachStore('status queries', (t) => {
  test('open rows are counted whole and finished ones over the window, per lane; other scopes stay out unless no scope is given', async () => {
    await rowIn(t, 'completed')
    t.clock.advance(2 * DAY_MS)
    const now = t.clock.now()
    await rowIn(t, 'pending')
    await rowIn(t, 'pending', {next_attempt_at: now + 60_000})
    await rowIn(t, 'leased')
    await rowIn(t, 'failed', {errorCode: 'edge_host_5xx'})
    await rowIn(t, 'uncertain', {operation: 'artifact_cleanup', errorCode: 'x'})
    await rowIn(t, 'completed')
    await rowIn(t, 'cancelled', {operation: 'control_audit'})
    await rowIn(t, 'failed', {dispatch_namespace: OTHER_SCOPE})

    const sorted = <T extends {operation: string; status: string}>(rows: T[]) =>
      [...rows].sort((a, b) => `${a.operation}/${a.status}`.localeCompare(`${b.operation}/${b.status}`))
    expect(sorted(await t.store.status.openCounts(SCOPE))).toEqual([
      {operation: 'artifact_cleanup', status: 'uncertain', count: 1},
      {operation: 'deploy', status: 'failed', count: 1},
      {operation: 'deploy', status: 'leased', count: 1},
      {operation: 'deploy', status: 'pending', count: 2},
    ])
    expect((await t.store.status.openCounts(null)).find((count) => count.operation === 'deploy' && count.status === 'failed')?.count).toBe(2)

    const finished = await t.store.status.finishedCounts(SCOPE, now - DAY_MS)
    expect(finished).toHaveLength(6)
    expect(finished.filter((count) => count.count > 0)).toEqual([
      {operation: 'deploy', status: 'completed', count: 1},
      {operation: 'control_audit', status: 'cancelled', count: 1},
    ])
    // The window reaches back to the first completion.
    expect(
      (await t.store.status.finishedCounts(SCOPE, now - 3 * DAY_MS)).find((count) => count.operation === 'deploy' && count.status === 'completed')?.count,
    ).toBe(2)
  })

  test('oldest due: the earliest due pending row and the earliest expired lease per lane; nothing not yet due', async () => {
    const start = t.clock.now()
    await rowIn(t, 'pending', {next_attempt_at: start - 30_000})
    await rowIn(t, 'pending', {next_attempt_at: start + 30_000})
    await rowIn(t, 'pending', {operation: 'artifact_cleanup', next_attempt_at: null})
    await rowIn(t, 'leased', {operation: 'control_audit'})
    const before = await t.store.status.oldestDue(SCOPE, start)
    expect(before).toEqual([
      {operation: 'deploy', pendingDueSince: start - 30_000, leaseExpiredSince: null},
      {operation: 'artifact_cleanup', pendingDueSince: null, leaseExpiredSince: null},
      {operation: 'control_audit', pendingDueSince: null, leaseExpiredSince: null},
    ])
    t.clock.advance(LEASE_MS + 5_000)
    const after = await t.store.status.oldestDue(SCOPE, t.clock.now())
    expect(after[2]).toEqual({operation: 'control_audit', pendingDueSince: null, leaseExpiredSince: start + LEASE_MS})
    expect((await t.store.status.oldestDue(OTHER_SCOPE, t.clock.now())).every((due) => due.pendingDueSince === null && due.leaseExpiredSince === null)).toBe(
      true,
    )
  })

  test('deferred deploys, leased rows by expiry, failures grouped by error code with their rows newest first', async () => {
    await rowIn(t, 'deferred', {last_error_code: 'edge_host_fenced'})
    await rowIn(t, 'deferred', {last_error_code: 'edge_host_fenced'})
    await rowIn(t, 'pending', {operation: 'artifact_cleanup', last_error_code: 'edge_host_fenced'})
    const counts = await t.store.status.openCounts(SCOPE)
    expect(counts.filter((count) => count.status === 'deferred')).toEqual([{operation: 'deploy', status: 'deferred', count: 2}])

    const late = await rowIn(t, 'leased')
    t.clock.advance(-10_000)
    const early = await rowIn(t, 'leased', {operation: 'artifact_cleanup'})
    t.clock.advance(10_000)
    expect((await t.store.status.leasedRows(SCOPE, 10)).map((leased) => leased.id)).toEqual([early.id, late.id])
    expect(await t.store.status.leasedRows(SCOPE, 1)).toHaveLength(1)

    const first = await rowIn(t, 'failed', {errorCode: 'edge_host_5xx', script_name: scriptNameFor('acme', 'a')})
    t.clock.advance(1_000)
    const second = await rowIn(t, 'failed', {errorCode: 'edge_host_5xx'})
    await rowIn(t, 'uncertain', {errorCode: 'worker_readiness_timeout'})
    const uncoded = await rowIn(t, 'failed', {operation: 'control_audit'})
    await rowIn(t, 'failed', {errorCode: 'edge_host_5xx', dispatch_namespace: OTHER_SCOPE})

    const groups = await t.store.status.errorGroups(SCOPE)
    expect(groups.map(({status, operation, last_error_code, count}) => ({status, operation, last_error_code, count}))).toEqual([
      {status: 'failed', operation: 'deploy', last_error_code: 'edge_host_5xx', count: 2},
      {status: 'failed', operation: 'control_audit', last_error_code: null, count: 1},
      {status: 'uncertain', operation: 'deploy', last_error_code: 'worker_readiness_timeout', count: 1},
    ])
    expect(groups[0]!.latest_at).toBe(second.updated_at)
    const inGroup = await t.store.status.groupRows(SCOPE, {status: 'failed', operation: 'deploy', last_error_code: 'edge_host_5xx'}, 10)
    expect(inGroup.map((member) => member.id)).toEqual([second.id, first.id])
    expect(inGroup[1]).toMatchObject({script_name: scriptNameFor('acme', 'a'), attempts: 1, last_error_code: 'edge_host_5xx'})
    expect(inGroup[1]).not.toHaveProperty('payload')
    expect(inGroup[1]).not.toHaveProperty('lease_token')
    expect(
      (await t.store.status.groupRows(SCOPE, {status: 'failed', operation: 'control_audit', last_error_code: null}, 10)).map((member) => member.id),
    ).toEqual([uncoded.id])
  })

  test('a failed or uncertain deploy that a later completed deploy of its Worker replaced is history: out of the groups, counted apart', async () => {
    const replacedFailure = await rowIn(t, 'failed', {worker_id: 'w-1', errorCode: 'edge_host_5xx'})
    t.clock.advance(1_000)
    await rowIn(t, 'uncertain', {worker_id: 'w-1', errorCode: 'worker_readiness_timeout'})
    t.clock.advance(1_000)
    await rowIn(t, 'completed', {worker_id: 'w-1'})
    t.clock.advance(1_000)
    const laterFailure = await rowIn(t, 'failed', {worker_id: 'w-1', errorCode: 'edge_host_5xx'})
    const otherWorker = await rowIn(t, 'failed', {worker_id: 'w-2', errorCode: 'edge_host_5xx'})
    await rowIn(t, 'completed', {worker_id: 'w-2', operation: 'artifact_cleanup'})

    const groups = await t.store.status.errorGroups(SCOPE)
    expect(groups.map(({status, operation, last_error_code, count}) => ({status, operation, last_error_code, count}))).toEqual([
      {status: 'failed', operation: 'deploy', last_error_code: 'edge_host_5xx', count: 2},
    ])
    const inGroup = await t.store.status.groupRows(SCOPE, {status: 'failed', operation: 'deploy', last_error_code: 'edge_host_5xx'}, 10)
    expect(inGroup.map((member) => member.id).sort()).toEqual([laterFailure.id, otherWorker.id].sort())
    expect(inGroup.map((member) => member.id)).not.toContain(replacedFailure.id)
    expect(await t.store.status.supersededFailures(SCOPE)).toBe(2)
    expect(await t.store.status.supersededFailures(OTHER_SCOPE)).toBe(0)
  })

  test('a failed control command is history once the same command on the same secret, key or account of its Worker completed', async () => {
    const control = (status: OutboxRow['status'], operation: string, target: string | null, workerId = 'w-1') => {
      const id = newId()
      return rowIn(t, status, {
        id,
        operation: 'control_audit',
        worker_id: workerId,
        dedupe_key: controlAuditDedupeKey({operation, target}, id),
        errorCode: 'edge_host_unreachable',
      })
    }
    await control('failed', 'secrets.put', 'API_TOKEN')
    const otherSecret = await control('failed', 'secrets.put', 'OTHER')
    const otherWorker = await control('failed', 'secrets.put', 'API_TOKEN', 'w-2')
    await control('uncertain', 'access_policy.api_key.rotate', null)
    t.clock.advance(1_000)
    await control('completed', 'secrets.put', 'API_TOKEN')
    await control('completed', 'secrets.delete', 'OTHER')
    await control('completed', 'access_policy.api_key.rotate', null)

    const failed = await t.store.status.groupRows(SCOPE, {status: 'failed', operation: 'control_audit', last_error_code: 'edge_host_unreachable'}, 10)
    expect(failed.map((member) => member.id).sort()).toEqual([otherSecret.id, otherWorker.id].sort())
    expect((await t.store.status.errorGroups(SCOPE)).map(({status, count}) => ({status, count}))).toEqual([{status: 'failed', count: 2}])
    expect(await t.store.status.supersededFailures(SCOPE)).toBe(2)
  })

  test('pending orphans (the one rule the retirement lanes and status share): purged companies, a company id taken again, confirmations and the upload grace', async () => {
    const deployOf = async (company: string, department: string, status: OutboxRow['status'], scope = SCOPE) => {
      const worker = await t.store.workers.create({
        company_id: company,
        department_id: department,
        script_name: scriptNameFor(company, department),
        status: 'active',
      })
      await rowIn(t, status, {company_id: company, department_id: department, worker_id: worker.id, script_name: worker.script_name, dispatch_namespace: scope})
      return worker.id
    }
    for (const company of ['gone', 'reused', 'live']) {
      await t.store.tenants.createCompany({id: company, name: company})
      for (const department of ['a', 'b']) await t.store.tenants.createDepartment({id: `${company}-${department}`, company_id: company, name: department})
    }
    const goneSettled = await deployOf('gone', 'gone-a', 'completed')
    const goneUnsettled = await deployOf('gone', 'gone-b', 'pending')
    const reused = await deployOf('reused', 'reused-a', 'completed')
    await deployOf('reused', 'reused-b', 'completed', OTHER_SCOPE)
    await deployOf('live', 'live-a', 'completed')
    t.clock.advance(DAY_MS)
    await t.store.tenants.purgeCompany('gone')
    await t.store.tenants.purgeCompany('reused')
    await t.store.tenants.createCompany({id: 'reused', name: 'reused again'})

    const cutoff = t.clock.now() - 900_000
    const found = await t.store.retirements.pendingOrphans(SCOPE, cutoff)
    expect(found.map((orphan) => orphan.worker_id).sort()).toEqual([goneSettled, goneUnsettled, reused].sort())
    expect(found.find((orphan) => orphan.worker_id === goneUnsettled)).toMatchObject({
      company_id: 'gone',
      department_id: 'gone-b',
      script_name: scriptNameFor('gone', 'gone-b'),
      unsettled: true,
    })
    expect(found.filter((orphan) => orphan.unsettled).map((orphan) => orphan.worker_id)).toEqual([goneUnsettled])

    await t.store.audit.append({
      id: `confirm-${reused}`,
      action: ORPHAN_CONFIRMATION_ACTION,
      resource_type: 'edge_worker',
      resource_id: reused,
      actor_type: 'system',
      actor_id: '',
      auth_method: 'system',
      result: 'success',
      reason_code: SCOPE,
      facts: {},
    })
    expect((await t.store.retirements.pendingOrphans(SCOPE, cutoff)).map((orphan) => orphan.worker_id).sort()).toEqual([goneSettled, goneUnsettled].sort())
    expect(await t.store.retirements.pendingOrphans('onprem:000000000000', cutoff)).toEqual([])
  })
})

describeEachStore('operator retry and cancel', (t) => {
  test('retry now makes a failed, uncertain or pending row due now and hands it to the passes; attempts and last error stay', async () => {
    const failed = await rowIn(t, 'failed', {errorCode: 'edge_host_5xx'})
    const later = await rowIn(t, 'pending', {next_attempt_at: t.clock.now() + 3_600_000, reserved_by: 'waiting-deploy'})
    t.clock.advance(5_000)
    const retried = await t.store.outbox.retryNow(failed.id, {scope: SCOPE})
    expect(retried).toMatchObject({outcome: 'done', before: {status: 'failed'}})
    expect(await t.store.outbox.get(failed.id)).toMatchObject({
      status: 'pending',
      next_attempt_at: t.clock.now(),
      lease_owner: null,
      lease_token: null,
      attempts: 1,
      last_error_code: 'edge_host_5xx',
    })
    expect(await t.store.outbox.retryNow(later.id, {scope: null})).toMatchObject({outcome: 'done'})
    expect(await t.store.outbox.get(later.id)).toMatchObject({status: 'pending', next_attempt_at: t.clock.now(), reserved_by: null})
    // A pass claims it at once.
    const claimed = await t.store.outbox.claim({operation: 'deploy', scope: SCOPE, owner: 'pass', limit: 10, leaseSeconds: 60})
    expect(claimed.map((claimedRow) => claimedRow.id).sort()).toEqual([failed.id, later.id].sort())
  })

  test('a row under a live lease is never taken from its runner; once the lease expired it may be; finished rows, other scopes and missing rows are refused', async () => {
    const leased = await rowIn(t, 'leased')
    expect(await t.store.outbox.retryNow(leased.id, {scope: SCOPE})).toMatchObject({outcome: 'inflight', row: {lease_owner: 'runner-a'}})
    expect(await t.store.outbox.cancel(leased.id, {scope: SCOPE})).toMatchObject({outcome: 'inflight'})
    expect(await t.store.outbox.get(leased.id)).toMatchObject({status: 'leased', lease_token: leased.lease_token})

    t.clock.advance(LEASE_MS + 1)
    expect(await t.store.outbox.cancel(leased.id, {scope: SCOPE})).toMatchObject({
      outcome: 'done',
      before: {status: 'leased'},
      row: {status: 'cancelled', lease_token: null},
    })
    // The runner that lost its lease settles nothing.
    expect(await t.store.outbox.settle(leased.id, leased.lease_token!, {status: 'completed'})).toBe(false)

    const completed = await rowIn(t, 'completed')
    expect(await t.store.outbox.retryNow(completed.id, {scope: SCOPE})).toMatchObject({outcome: 'terminal'})
    expect(await t.store.outbox.cancel(leased.id, {scope: SCOPE})).toMatchObject({outcome: 'terminal'})
    const foreign = await rowIn(t, 'failed', {dispatch_namespace: OTHER_SCOPE})
    expect(await t.store.outbox.retryNow(foreign.id, {scope: SCOPE})).toMatchObject({outcome: 'wrong_scope'})
    expect(await t.store.outbox.retryNow('00000000-0000-4000-8000-000000000000', {scope: SCOPE})).toEqual({outcome: 'missing', row: null})
  })

  test('cancel refuses a deploy whose version is deploying, and cancels one whose version is only built', async () => {
    await t.store.tenants.createCompany({id: 'acme', name: 'Acme'})
    await t.store.tenants.createDepartment({id: 'acme-a', company_id: 'acme', name: 'A'})
    const worker = await t.store.workers.create({company_id: 'acme', department_id: 'acme-a', script_name: scriptNameFor('acme', 'acme-a'), status: 'new'})
    const version = await t.store.workers.createVersion({
      worker_id: worker.id,
      release_generation: 'rg',
      builder_policy: 'department-worker-project-v2.9',
      project_artifact_key: 'p',
      project_digest: 'd',
      bundle_artifact_key: 'b',
      bundle_digest: 'd',
      manifest: {},
      receipt: {},
    })
    const deploy = await rowIn(t, 'pending', {worker_id: worker.id, version_id: version.id})
    const token = await lease(t.store, deploy.id)
    expect(await t.store.deployments.beginDeploying({outboxId: deploy.id, leaseToken: token, workerId: worker.id, versionId: version.id})).toEqual({
      outcome: 'deploying',
    })
    expect(
      await t.store.deployments.retryLater({
        outboxId: deploy.id,
        leaseToken: token,
        workerId: worker.id,
        versionId: version.id,
        errorCode: 'edge_host_no_answer',
        error: 'cut',
        nextAttemptAt: t.clock.now() + 30_000,
        waits: 1,
        attempted: true,
        keepDeploying: true,
      }),
    ).toBe('rescheduled')

    expect(await t.store.outbox.cancel(deploy.id, {scope: SCOPE})).toMatchObject({outcome: 'deploying'})
    expect(await t.store.outbox.get(deploy.id)).toMatchObject({status: 'pending'})

    const other = await rowIn(t, 'pending', {worker_id: worker.id, version_id: 'a-built-version-elsewhere'})
    expect(await t.store.outbox.cancel(other.id, {scope: SCOPE})).toMatchObject({outcome: 'done', row: {status: 'cancelled', next_attempt_at: null}})
  })
})
