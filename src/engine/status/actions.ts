// What an operator can do from `edgeworkers status`: read one outbox row in full (secrets redacted),
// retry a row now, cancel one, run one pass of a lane. Retry and cancel follow the lease rules of the
// outbox (a row under a live lease is never taken from its runner) and are audited like every other
// operator action; retrying a deploy is an enqueue, so the maintenance and restore gates refuse it.
import {KitError} from '../../errors.js'
import {auditEntry, type AuditActor, type JsonObject, type OperatorActionResult, type OutboxListFilter, type OutboxRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {assertEnqueueGatesOpen} from '../gates.js'
import {runPass} from '../pass/index.js'
import {LANE_LABELS, type LaneName} from '../pass/lane.js'
import {redactSecrets} from '../../util/redact.js'
import {formatDuration} from './snapshot.js'
import {resolveIdPrefix, resolveIdPrefixOrNull} from '../id-prefix.js'
import {rollbackWorker} from '../deploy/rollback.js'

export const OUTBOX_ACTIONS = {
  retried: 'outbox_row.retried',
  cancelled: 'outbox_row.cancelled',
} as const

/** An outbox row as an operator may see it: the payload redacted, the lease token left out. */
export type OutboxRowDetail = Omit<OutboxRow, 'lease_token'>

export interface ActionDone {
  message: string
}

/** Outbox rows, newest first, as `outbox list` filters them. */
export async function listOutboxRows(engine: Engine, filter: OutboxListFilter): Promise<OutboxRow[]> {
  return engine.store.outbox.list(filter)
}

/** The scope operator actions are confined to: the paired one, or none (any row) when nothing is paired. */
export async function operatorScope(engine: Engine): Promise<string | null> {
  const resolution = await engine.resolveProvider()
  return resolution.status === 'ready' ? resolution.scope : engine.settings.provider.scope || null
}

/** The full id of the outbox row `typed` names: the id, or a unique prefix of it (not_found, or an ambiguous prefix, otherwise). */
export function outboxRowId(engine: Engine, typed: string): Promise<string> {
  return resolveIdPrefix('outbox row', typed, (prefix, limit) => engine.store.outbox.idsWithPrefix(prefix, limit))
}

/** The row `typed` (an id or a unique prefix) names, or null when none does; an ambiguous prefix throws. */
export async function outboxRowDetail(engine: Engine, typed: string): Promise<OutboxRowDetail | null> {
  const id = await resolveIdPrefixOrNull('outbox row', typed, (prefix, limit) => engine.store.outbox.idsWithPrefix(prefix, limit))
  const row = id === null ? undefined : await engine.store.outbox.get(id)
  if (!row) return null
  const {lease_token: _token, ...visible} = row
  return {...visible, payload: redactSecrets(row.payload) as JsonObject}
}

/** Makes the row pending and due now, for the next pass. */
export async function retryOutboxRow(engine: Engine, typed: string, actor: AuditActor): Promise<ActionDone> {
  const id = await outboxRowId(engine, typed)
  const scope = await operatorScope(engine)
  const row = await engine.store.outbox.get(id)
  if (row?.operation === 'deploy') await assertEnqueueGatesOpen(engine, row.dispatch_namespace)
  const result = await engine.store.transaction(async (tx) => {
    const outcome = await tx.outbox.retryNow(id, {scope})
    if (outcome.outcome === 'done') await tx.audit.append(actionEntry(OUTBOX_ACTIONS.retried, outcome, actor))
    return outcome
  })
  if (result.outcome !== 'done') throw refusal(id, 'retry', result, engine.store.clock.now())
  const deferred = result.row.status === 'deferred' ? ' (deferred by a backup fence: the deferred lane takes it once the fence ends)' : ''
  return {message: `outbox row ${id} is pending and due now; the next pass dispatches it${deferred}`}
}

export async function cancelOutboxRow(engine: Engine, typed: string, actor: AuditActor): Promise<ActionDone> {
  const id = await outboxRowId(engine, typed)
  const scope = await operatorScope(engine)
  const result = await engine.store.transaction(async (tx) => {
    const outcome = await tx.outbox.cancel(id, {scope})
    if (outcome.outcome === 'done') await tx.audit.append(actionEntry(OUTBOX_ACTIONS.cancelled, outcome, actor))
    return outcome
  })
  if (result.outcome !== 'done') throw refusal(id, 'cancel', result, engine.store.clock.now())
  return {message: `outbox row ${id} cancelled (was ${result.before.status}); no lane takes it again`}
}

/** Which rows a bulk `outbox retry|cancel` acts on: all of these that are given. */
export interface OutboxSelection {
  status?: OutboxListFilter['status']
  operation?: OutboxListFilter['operation']
  /** Only rows created at least this many seconds ago. */
  olderThanSeconds?: number
}

export interface BulkActionDone {
  done: string[]
  refused: Array<{id: string; message: string}>
  message: string
}

/** Retries or cancels every row the selection names (oldest first), each under the same rules as one row; a refused row does not stop the others. */
export async function actOnOutboxRows(engine: Engine, action: 'retry' | 'cancel', selection: OutboxSelection, actor: AuditActor): Promise<BulkActionDone> {
  const cutoff = engine.store.clock.now() - (selection.olderThanSeconds ?? 0) * 1000
  const rows = (await engine.store.outbox.list({status: selection.status, operation: selection.operation, limit: 10_000}))
    .filter((row) => row.created_at <= cutoff)
    .reverse()
  const act = action === 'retry' ? retryOutboxRow : cancelOutboxRow
  const result: BulkActionDone = {done: [], refused: [], message: ''}
  for (const row of rows) {
    try {
      await act(engine, row.id, actor)
      result.done.push(row.id)
    } catch (error) {
      if (!(error instanceof KitError)) throw error
      result.refused.push({id: row.id, message: error.message})
    }
  }
  const verb = action === 'retry' ? 'retried' : 'cancelled'
  result.message = [`${result.done.length} of ${rows.length} matching rows ${verb}`, ...result.refused.map((row) => `refused ${row.id}: ${row.message}`)].join(
    '\n',
  )
  return result
}

/** One reconcile pass over one lane, in this process (what `edgeworkers reconcile --lane L` does); `signal` stops it between rows. */
export async function runLaneOnce(engine: Engine, lane: LaneName, signal?: AbortSignal): Promise<ActionDone> {
  const result = await runPass(engine, {lanes: [lane], signal})
  if (result.status === 'skipped') return {message: `${LANE_LABELS[lane]} pass skipped: ${result.skipped?.code}: ${result.skipped?.message}`}
  const summary = result.lanes[0]
  if (!summary) return {message: `${LANE_LABELS[lane]} pass ran nothing`}
  const tally = (['claimed', 'completed', 'retried', 'failed', 'uncertain', 'skipped'] as const).map((key) => `${key} ${summary[key]}`).join(', ')
  const note = summary.error ? `; error: ${summary.error}` : summary.skippedReason ? `; ${summary.skippedReason}` : ''
  return {message: `${LANE_LABELS[lane]} pass: ${tally} in ${summary.durationMs} ms${note}`}
}

/** The audit row of an operator action on an outbox row; its id is bound to the state acted on, so each action writes its own row. */
function actionEntry(
  action: (typeof OUTBOX_ACTIONS)[keyof typeof OUTBOX_ACTIONS],
  result: Extract<OperatorActionResult, {outcome: 'done'}>,
  actor: AuditActor,
) {
  const {before, row} = result
  return auditEntry({
    action,
    resource: {type: 'outbox_row', id: row.id},
    actor,
    discriminator: String(before.updated_at),
    reasonCode: before.last_error_code,
    facts: {
      operation: row.operation,
      scope: row.dispatch_namespace,
      script_name: row.script_name,
      previous_status: before.status,
      status: row.status,
      attempts: row.attempts,
    },
  })
}

function refusal(id: string, verb: 'retry' | 'cancel', result: Exclude<OperatorActionResult, {outcome: 'done'}>, now: number): KitError {
  switch (result.outcome) {
    case 'missing':
      return new KitError('not_found', `outbox row ${id} not found`)
    case 'wrong_scope':
      return new KitError('conflict', `cannot ${verb} outbox row ${id}: it belongs to scope ${result.row.dispatch_namespace}, another kit's`)
    case 'inflight':
      return new KitError(
        'conflict',
        `cannot ${verb} outbox row ${id}: ${result.row.lease_owner ?? 'a runner'} holds its lease for ${formatDuration(Number(result.row.lease_expires_at) - now)} more`,
      )
    case 'terminal':
      return new KitError('conflict', `cannot ${verb} outbox row ${id}: it is already ${result.row.status}`)
    case 'deploying':
      return new KitError(
        'conflict',
        `cannot cancel outbox row ${id}: its version is deploying and may already be on the host; retry it so a pass can settle it`,
      )
  }
}

/** `status`'s rollback of a Worker: `rollback <department>` with its default target, waiting for the deploy task. */
export async function rollbackFromStatus(engine: Engine, departmentId: string, actor: AuditActor): Promise<ActionDone> {
  const outcome = await rollbackWorker(engine, {departmentId, wait: true, actor})
  const detail = outcome.state === 'completed' ? '' : ` (${outcome.code ?? outcome.message ?? 'see outbox row'})`
  return {message: `Worker of ${departmentId} rolled back to ${outcome.rolledBackTo}: ${outcome.state}${detail}`}
}
