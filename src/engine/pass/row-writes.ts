// The writes a lane makes on a row it leased, from the row's result (../row-result.ts): settle it as
// the result says, or requeue it on the retry ladder. Fenced by the lease token: a lease lost
// meanwhile changes nothing, and the row is `skipped`.
import type {OutboxRow, SettledOutboxStatus} from '../../store/index.js'
import {LEASE_LOST, type RowResult} from '../row-result.js'
import {retryPlan} from '../retry.js'
import type {LaneRun} from './lane.js'

type SettledResult = Extract<RowResult, {outcome: 'done' | 'terminal' | 'uncertain'}>

/** The status a settled result leaves: done → completed, or cancelled with the code of why nothing is left to do. */
function statusOf(result: SettledResult): SettledOutboxStatus {
  if (result.outcome === 'done') return result.code === null ? 'completed' : 'cancelled'
  return result.outcome === 'terminal' ? 'failed' : 'uncertain'
}

/** Settles the leased row as `result` says; `attempted`: the lane asked the host (or the artifact store) about it. */
export async function settleRow(run: LaneRun, row: OutboxRow, result: SettledResult, attempted = false): Promise<RowResult> {
  const settled = await run.engine.store.outbox.settle(row.id, row.lease_token!, {
    status: statusOf(result),
    errorCode: result.code,
    error: result.message,
    attempted,
  })
  return settled ? result : LEASE_LOST
}

/**
 * Requeues the leased row after a failed attempt, on the engine's ladder of attempts (../retry.ts):
 * requeue_after, or terminal once its attempts ran out (the row settles `failed`).
 */
export async function requeueRow(run: LaneRun, row: OutboxRow, failure: {code: string; message: string}): Promise<RowResult> {
  const {engine} = run
  const plan = retryPlan(engine.settings.backoff, 'failed_attempt', {attempts: row.attempts + 1, waits: row.waits}, engine.store.clock.now())
  const retried = await engine.store.outbox.retryLater(row.id, row.lease_token!, {errorCode: failure.code, error: failure.message, ...plan, attempted: true})
  if (retried.outcome === 'lease_lost') return LEASE_LOST
  return retried.outcome === 'failed' ? {outcome: 'terminal', ...failure} : {outcome: 'requeue_after', ...failure}
}
