// The control audit lane: control mutations whose outcome the command
// that sent them never recorded are settled from the host's receipt — never by sending the mutation
// again — and completed rows' receipts are acknowledged.
//
// Recovery round: claim → retired Worker? cancel (no host call) → control target still the Worker
// the row named, with a deployed release → read the receipt by {mutationId, commandDigest}, validate
// it strictly, settle (../control/receipts.ts).
// Ack round: claim completed rows due for acknowledgement → retired Worker? stop (no host call) →
// control.receipt.ack, exactly {"acknowledged": true}, else the backoff ladder.
import type {EdgeProvider} from '../../provider/types.js'
import {stampOf, type OutboxRow} from '../../store/index.js'
import type {ReceiptSettlement} from '../control/receipts.js'
import {DONE, LEASE_LOST, type RowResult} from '../row-result.js'
import {wakeRowsWaitingForHost} from './host-wake.js'
import {tally, type LaneRun} from './lane.js'
import {settleRow} from './row-writes.js'

const RETIRED_LOG = 'Edge Worker control receipt settled: its Worker is retired'
/** Another runner's claim took the row over (the ack round's compare-and-set found another stamp). */
const CLAIM_LOST: RowResult = {outcome: 'skipped', reason: 'claim_lost'}

/** The receipt rules (and the protocol's schemas behind them) load once a row is claimed: most passes claim none. */
const receipts = () => import('../control/receipts.js')

export async function controlAuditLane(run: LaneRun): Promise<void> {
  if (run.gate.closed) return run.skip(run.gate.message)
  const resolution = await run.engine.resolveProvider()
  if (resolution.status !== 'ready') return run.skip(resolution.message)
  const retired = {retired: 0, ackRetired: 0}
  await wakeRowsWaitingForHost(run, 'control_audit')
  await recoveryRound(run, resolution.provider, retired)
  await ackRound(run, resolution.provider, retired)
  run.note(`retired=${retired.retired} ack_retired=${retired.ackRetired}`)
}

async function recoveryRound(run: LaneRun, provider: EdgeProvider, retiredTally: {retired: number}): Promise<void> {
  const {store, owner, settings} = run.engine
  const {lease_seconds: leaseSeconds, batch_size: limit, request_grace_seconds: graceSeconds} = settings.control_audit
  while (!run.shouldStop()) {
    const claimed = await store.controlAudits.claimRecoverable({scope: run.scope, owner, limit, leaseSeconds, graceSeconds})
    if (claimed.length === 0) return
    run.counts.claimed += claimed.length
    let next = 0
    try {
      for (; next < claimed.length && !run.shouldStop(); next++) {
        const row = claimed[next]!
        if (!run.firstVisit(row.id)) break
        const result = await recoverOne(run, provider, row, retiredTally)
        run.rowDone({rowId: row.id, scriptName: row.script_name, outcome: tally(run, result)})
      }
    } finally {
      for (const row of claimed.slice(next)) {
        // Best effort: a lease not given back expires after control_audit.lease_seconds.
        await store.sweeps.releaseLease(row.id, row.lease_token!).catch(() => false)
        run.counts.skipped++
      }
    }
    if (next < claimed.length) return
  }
}

async function recoverOne(run: LaneRun, provider: EdgeProvider, row: OutboxRow, retiredTally: {retired: number}): Promise<RowResult> {
  const {log} = run.engine
  const {CONTROL_CODES, controlPayloadOf, settleFromReceipt} = await receipts()
  const settleFailed = async (code: string, message: string): Promise<RowResult> => {
    const result = await settleRow(run, row, {outcome: 'terminal', code, message})
    if (result.outcome === 'terminal') log.warn({outboxId: row.id, code}, `Edge Worker control audit failed: ${message}`)
    return result
  }
  if (await isRetired(run, row)) {
    const result = await settleRow(run, row, {
      outcome: 'done',
      code: CONTROL_CODES.workerRetired,
      message: 'Worker retired before its control receipt was read',
    })
    if (result.outcome === 'done') {
      retiredTally.retired++
      log.info({outboxId: row.id, workerId: row.worker_id}, RETIRED_LOG)
    }
    return result
  }
  const payload = controlPayloadOf(row)
  if ('problem' in payload) return settleFailed(CONTROL_CODES.payloadInvalid, payload.problem)
  const target = await targetProblem(run, row)
  if (target) return settleFailed(CONTROL_CODES.targetUnavailable, target)
  return receiptRowResult(await settleFromReceipt(run.engine, provider, row, payload))
}

/** What a receipt settlement (../control/receipts.ts) made of the row; a retry whose attempts ran out settled it `failed`. */
function receiptRowResult(settled: ReceiptSettlement): RowResult {
  switch (settled.outcome) {
    case 'completed':
      return DONE
    case 'failed':
      return {outcome: 'terminal', code: settled.code, message: settled.message}
    case 'retried':
      return {outcome: 'requeue_after', code: settled.code, message: settled.message}
    case 'lease_lost':
      return LEASE_LOST
  }
}

async function ackRound(run: LaneRun, provider: EdgeProvider, retiredTally: {ackRetired: number}): Promise<void> {
  const {store, owner, settings, log} = run.engine
  while (!run.shouldStop()) {
    const claimed = await store.controlAudits.claimAcks({
      scope: run.scope,
      owner,
      limit: settings.control_audit.batch_size,
      leaseSeconds: settings.control_audit.lease_seconds,
    })
    if (claimed.length === 0) return
    const {CONTROL_CODES, acknowledgeReceipt} = await receipts()
    run.counts.claimed += claimed.length
    for (const row of claimed) {
      // A stamp not acted on holds the row until it passes (control_audit.lease_seconds).
      if (run.shouldStop() || !run.firstVisit(`ack:${row.id}`)) {
        run.counts.skipped++
        continue
      }
      const stamp = stampOf(row)
      let result: RowResult
      if (await isRetired(run, row)) {
        const stopped = await store.controlAudits.stopAcks(stamp, {
          errorCode: CONTROL_CODES.workerRetired,
          error: 'provider receipt retired with its Worker',
          attempted: false,
        })
        if (stopped) {
          retiredTally.ackRetired++
          log.info({outboxId: row.id, workerId: row.worker_id}, RETIRED_LOG)
        }
        result = stopped ? DONE : CLAIM_LOST
      } else {
        result = ackRowResult(await acknowledgeReceipt(run.engine, provider, stamp, row), CONTROL_CODES.ackFailed)
      }
      run.rowDone({rowId: row.id, scriptName: row.script_name, outcome: tally(run, result)})
    }
  }
}

/** What a receipt acknowledgement (../control/receipts.ts) made of the row; `failed`: its attempts ran out. */
function ackRowResult(acked: 'acknowledged' | 'rescheduled' | 'failed' | 'lost', code: string): RowResult {
  switch (acked) {
    case 'acknowledged':
      return DONE
    case 'rescheduled':
      return {outcome: 'requeue_after', code, message: 'the control receipt acknowledgement is retried by a later pass'}
    case 'failed':
      return {outcome: 'terminal', code, message: 'the control receipt acknowledgement failed and its attempts ran out'}
    case 'lost':
      return CLAIM_LOST
  }
}

function isRetired(run: LaneRun, row: OutboxRow): Promise<boolean> {
  return run.engine.store.controlAudits.workerRetired(row.worker_id ?? '', row.department_id ?? '')
}

/** The control target must still be the Worker the row named, under the same script name, with a deployed release. */
async function targetProblem(run: LaneRun, row: OutboxRow): Promise<string | null> {
  const {store} = run.engine
  const worker = row.worker_id ? await store.workers.get(row.worker_id) : undefined
  if (!worker) return 'the Worker row no longer exists'
  if (worker.script_name !== row.script_name) return `the Worker is now served as ${worker.script_name}, not ${row.script_name}`
  const version = worker.current_version_id ? await store.workers.getVersion(worker.current_version_id) : undefined
  return version?.state === 'deployed' ? null : 'the Worker has no deployed release'
}
