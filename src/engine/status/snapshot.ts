// One snapshot of the kit for `edgeworkers status`: the scope and its pairing, the edge host's health,
// the gates, the outbox per lane and status, leased rows, failures grouped by error code, pending
// retirements and orphans, and the latest audit rows — plus the reasons it needs an operator. The
// store part and the host part are read concurrently; the host part is bounded by
// status.host_timeout_ms and never throws (an unreachable host is part of the answer).
import {
  OUTBOX_OPERATIONS,
  type AuditRow,
  type ErrorGroup,
  type JsonObject,
  type OrphanCandidate,
  type OutboxOperation,
  type OutboxRowSummary,
  type StatusCount,
} from '../../store/index.js'
import type {Engine} from '../context.js'
import {fenceView, type FenceView} from '../fence/fence.js'
import {hostStatus, type HostStatus} from '../host-status.js'
import {hostsReasons} from '../hosts/manage.js'
import {redactSecrets} from '../../util/redact.js'
import {formatDuration} from './format.js'
import {errorRateReason, errorRateThreshold, workersPanel, type WorkersPanel} from './workers.js'
import {bindingReasons, bindingsPanel, type BindingsPanel} from './bindings.js'

export {formatDuration, formatWindow} from './format.js'

/** How many rows each list of the snapshot carries at most. */
export const SNAPSHOT_LIST_LIMIT = 50
export const SNAPSHOT_AUDIT_LIMIT = 20

export interface LaneStatus {
  operation: OutboxOperation
  /** Every open row, however old. */
  pending: number
  leased: number
  failed: number
  uncertain: number
  /** Deploys held by a backup fence (status `deferred`); part of `pending`. */
  deferred: number
  /** Finished within the last `finishedWindowSeconds`. */
  completed: number
  cancelled: number
  /** How long the oldest due pending row has waited past its next_attempt_at; null when none is due. */
  oldestDueAgeMs: number | null
  /** How long the oldest expired lease has been expired; null when none has. */
  oldestExpiredLeaseAgeMs: number | null
}

export interface HostHealth extends HostStatus {
  /** Every shard up (the host's /readyz rule); null when the host did not answer. */
  ready: boolean | null
  shardsUp: number | null
}

export interface FenceStatus extends FenceView {
  /** Until the host lifts it by itself; negative once past. */
  timeLeftMs: number
  /** Still open in the store past its TTL: whoever began it never ended it. */
  overdue: boolean
}

export interface LeasedRow extends OutboxRowSummary {
  /** Until the lease expires; negative once expired (any runner may reclaim it). */
  leaseLeftMs: number
}

export interface WaitingRow extends OutboxRowSummary {
  /** Until its next attempt (negative once due: a pass takes it). */
  dueInMs: number
}

export interface StatusSnapshot {
  takenAt: string
  /** The kit scope this runner works for; null when no pairing tells it (rows of every scope are shown). */
  scope: string | null
  store: {backend: string; location: string}
  host: HostHealth
  fence: FenceStatus | null
  maintenance: {on: boolean; reason: string | null}
  restorePending: {on: boolean; reason: string | null}
  finishedWindowSeconds: number
  lanes: LaneStatus[]
  leased: LeasedRow[]
  /** Rows put back to wait — host unavailable, fenced, their Worker busy (../retry.ts) — next due first, with the time until then. */
  waiting: WaitingRow[]
  /** Failed and uncertain rows that wait for an operator, grouped (rows a later completed one of the same kind replaced are left out). */
  errorGroups: ErrorGroup[]
  /** Failed or uncertain rows a later completed one of the same kind on the same Worker replaced (a deploy, or the same control command on the same target): history, not attention. */
  supersededFailures: number
  retirements: {pending: number; workers: Array<{worker_id: string; script_name: string; department_id: string; status: string; since: number}>}
  /** null without a scope: orphans are per scope. */
  orphans: {pending: number; unsettled: number; workers: OrphanCandidate[]} | null
  audit: AuditRow[]
  /** Every live Worker of the kit, with its traffic over the host's recent window where the host reports any. */
  workers: WorkersPanel
  /** Queues over status.queue_backlog_threshold and failing cron triggers; null when the host did not answer. */
  bindings: BindingsPanel | null
  /** Why an operator should look (failed or uncertain rows, host unreachable or unpaired, fence overdue, a Worker's error rate); empty when nothing does. */
  attention: string[]
}

export interface SnapshotOptions {
  finishedWindowSeconds: number
  hostTimeoutMs: number
}

export function snapshotOptions(settings: Engine['settings']): SnapshotOptions {
  return {finishedWindowSeconds: settings.status.finished_window_seconds, hostTimeoutMs: settings.status.host_timeout_ms}
}

export async function takeSnapshot(engine: Engine, options: SnapshotOptions = snapshotOptions(engine.settings)): Promise<StatusSnapshot> {
  const {store, settings} = engine
  const resolution = await engine.resolveProvider()
  const scope = resolution.status === 'ready' ? resolution.scope : settings.provider.scope || null
  const now = store.clock.now()
  const [
    bindings,
    workers,
    host,
    openCounts,
    finishedCounts,
    oldestDue,
    leased,
    waiting,
    errorGroups,
    supersededFailures,
    retiring,
    orphans,
    audit,
    fence,
    gates,
  ] = await Promise.all([
    bindingsPanel(engine, options.hostTimeoutMs),
    workersPanel(engine, scope, {timeoutMs: options.hostTimeoutMs, threshold: errorRateThreshold(settings)}),
    hostStatus(engine, {timeoutMs: options.hostTimeoutMs}),
    store.status.openCounts(scope),
    store.status.finishedCounts(scope, now - options.finishedWindowSeconds * 1000),
    store.status.oldestDue(scope, now),
    store.status.leasedRows(scope, SNAPSHOT_LIST_LIMIT),
    store.status.waitingRows(scope, SNAPSHOT_LIST_LIMIT),
    store.status.errorGroups(scope),
    store.status.supersededFailures(scope),
    scope === null ? Promise.resolve([]) : store.retirements.pendingRetirements(scope),
    scope === null ? Promise.resolve(null) : store.retirements.pendingOrphans(scope, now - settings.host_reconcile.upload_grace_seconds * 1000),
    store.audit.list({limit: SNAPSHOT_AUDIT_LIMIT}),
    scope === null ? Promise.resolve(undefined) : store.kit.openFence(scope),
    scope === null ? Promise.resolve(null) : store.kit.getGates(scope),
  ])

  const countOf = (counts: StatusCount[], operation: OutboxOperation, status: string) =>
    counts.find((count) => count.operation === operation && count.status === status)?.count ?? 0
  const lanes = OUTBOX_OPERATIONS.map((operation): LaneStatus => {
    const due = oldestDue.find((entry) => entry.operation === operation)
    return {
      operation,
      pending: countOf(openCounts, operation, 'pending') + countOf(openCounts, operation, 'deferred'),
      leased: countOf(openCounts, operation, 'leased'),
      failed: countOf(openCounts, operation, 'failed'),
      uncertain: countOf(openCounts, operation, 'uncertain'),
      deferred: countOf(openCounts, operation, 'deferred'),
      completed: countOf(finishedCounts, operation, 'completed'),
      cancelled: countOf(finishedCounts, operation, 'cancelled'),
      oldestDueAgeMs: due?.pendingDueSince == null ? null : now - due.pendingDueSince,
      oldestExpiredLeaseAgeMs: due?.leaseExpiredSince == null ? null : now - due.leaseExpiredSince,
    }
  })
  const shardsUp = host.shards ? host.shards.filter((shard) => shard.state === 'up').length : null
  const fenceStatus: FenceStatus | null = fence
    ? {...fenceView(fence), timeLeftMs: Number(fence.expires_at) - now, overdue: Number(fence.expires_at) <= now}
    : null

  const snapshot: StatusSnapshot = {
    takenAt: new Date(now).toISOString(),
    scope,
    store: {backend: store.backend, location: store.location},
    host: {...host, ready: host.shards ? shardsUp === host.shards.length : null, shardsUp},
    fence: fenceStatus,
    maintenance: {on: gates?.maintenance ?? false, reason: gates?.reasons.maintenance ?? null},
    restorePending: {on: gates?.restore_pending ?? false, reason: gates?.reasons.restore_pending ?? null},
    finishedWindowSeconds: options.finishedWindowSeconds,
    lanes,
    leased: leased.map((row) => ({...row, leaseLeftMs: Number(row.lease_expires_at) - now})),
    waiting: waiting.map((row) => ({...row, dueInMs: Number(row.next_attempt_at) - now})),
    errorGroups,
    supersededFailures,
    retirements: {
      pending: retiring.length,
      workers: retiring.slice(0, SNAPSHOT_LIST_LIMIT).map((worker) => ({
        worker_id: worker.id,
        script_name: worker.script_name,
        department_id: worker.department_id,
        status: worker.status,
        since: worker.updated_at,
      })),
    },
    orphans: orphans && {
      pending: orphans.length,
      unsettled: orphans.filter((orphan) => orphan.unsettled).length,
      workers: orphans.slice(0, SNAPSHOT_LIST_LIMIT),
    },
    audit: audit.map((row) => ({...row, facts: redactSecrets(row.facts) as JsonObject})),
    workers,
    bindings,
    attention: [],
  }
  snapshot.attention = attentionReasons(snapshot)
  return snapshot
}

/**
 * What makes `status` exit 13: failed or uncertain rows waiting for an operator (not deploys a later
 * completed deploy of their Worker replaced), a host the kit cannot use, a fence open past its TTL,
 * a Worker whose error rate is over status.worker_error_* (./workers.ts), a queue backlog over
 * status.queue_backlog_threshold or a failing cron trigger (./bindings.ts).
 */
export function attentionReasons(snapshot: Pick<StatusSnapshot, 'errorGroups' | 'host' | 'fence' | 'workers' | 'bindings'>): string[] {
  const reasons: string[] = []
  const countOf = (status: ErrorGroup['status']) => snapshot.errorGroups.filter((group) => group.status === status).reduce((sum, group) => sum + group.count, 0)
  const failed = countOf('failed')
  const uncertain = countOf('uncertain')
  if (failed > 0) reasons.push(`${failed} failed outbox row${failed === 1 ? '' : 's'}`)
  if (uncertain > 0) reasons.push(`${uncertain} uncertain outbox row${uncertain === 1 ? '' : 's'}`)
  if (!snapshot.host.paired) reasons.push(`no usable edge host: ${snapshot.host.problem}`)
  else if (!snapshot.host.reachable) reasons.push(`edge host unreachable: ${snapshot.host.error}`)
  reasons.push(...hostsReasons(snapshot.host.hosts))
  if (snapshot.fence?.overdue)
    reasons.push(`backup fence ${snapshot.fence.id} is overdue: still open ${formatDuration(-snapshot.fence.timeLeftMs)} past its TTL`)
  const {windowSeconds} = snapshot.workers
  if (windowSeconds !== null) for (const row of snapshot.workers.workers) if (row.errorRateHigh) reasons.push(errorRateReason(row, windowSeconds))
  reasons.push(...bindingReasons(snapshot.bindings))
  return reasons
}
