// Reading a control mutation's receipt back and settling its outbox row, and acknowledging the
// receipt — shared by the command that sent the mutation and the control_audit lane, so both settle
// a row by the same rules. Neither ever sends the mutation again.
import {canonicalJson} from '../../canonical-json.js'
import {ProviderError, type EdgeProvider} from '../../provider/types.js'
import {AUDIT_ID_CONFLICT, auditEntry, type AuditEntryInput, type ClaimStamp, type OutboxRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {askedHost, EDGE_HOST_UNREACHABLE, retryCauseOf, retryPlan, type RetryCause} from '../retry.js'
import {messageOf} from '../../errors.js'
import {controlPayloadProblem, validateReceipt, type ControlPayload, type ValidReceipt} from './operations.js'

export const CONTROL_CODES = {
  payloadInvalid: 'control_payload_invalid',
  targetUnavailable: 'control_target_unavailable',
  receiptNotFound: 'control_receipt_not_found',
  receiptUnavailable: 'control_receipt_unavailable',
  receiptInvalid: 'control_receipt_invalid',
  auditConflict: 'control_audit_conflict',
  ackFailed: 'control_receipt_ack_failed',
  workerRetired: 'worker_retired',
} as const

export type ReceiptSettlement =
  /** `row`: the completed row's attempts and waits, for its receipt acknowledgement's retries. */
  | {outcome: 'completed'; current: Record<string, unknown>; noop: boolean; stamp: ClaimStamp; row: AckCounts}
  | {outcome: 'failed' | 'retried'; code: string; message: string}
  | {outcome: 'lease_lost'}

/** The payload of a control row, or the problem that makes it unusable. */
export function controlPayloadOf(row: OutboxRow): ControlPayload | {problem: string} {
  const problem = controlPayloadProblem(row.script_name ?? '', row.payload)
  return problem ? {problem: `the control payload is invalid: ${problem}`} : (row.payload as unknown as ControlPayload)
}

/**
 * Reads the receipt of a leased row's mutation by {mutationId: row id, commandDigest} and settles the
 * row: valid → `completed` with its audit row (id = the row id); none → `failed`
 * control_receipt_not_found; invalid → `failed` control_receipt_invalid; unreadable → retried
 * control_receipt_unavailable on the backoff ladder (edge_host_unreachable when the host was not reached).
 */
export async function settleFromReceipt(engine: Engine, provider: EdgeProvider, row: OutboxRow, payload: ControlPayload): Promise<ReceiptSettlement> {
  const token = row.lease_token!
  const fail = async (code: string, message: string): Promise<ReceiptSettlement> => {
    // Every settle here follows a receipt read that reached the host: one attempt.
    if (!(await engine.store.outbox.settle(row.id, token, {status: 'failed', errorCode: code, error: message, attempted: true}))) return {outcome: 'lease_lost'}
    engine.log.warn({outboxId: row.id, operation: payload.operation, code}, `Edge Worker control audit failed: ${message}`)
    return {outcome: 'failed', code, message}
  }

  let receipt: unknown
  try {
    receipt = await provider.getReceipt({mutationId: row.id, commandDigest: payload.commandDigest})
  } catch (error) {
    if (error instanceof ProviderError && error.code === 'edge_host_mutation_conflict') {
      return fail(CONTROL_CODES.receiptInvalid, 'the host filed this mutation id under another command digest')
    }
    const message = `the control receipt could not be read: ${messageOf(error)}`
    // A host that could not answer is waited for (never failed); any other failure is an attempt.
    const attempted = askedHost(error)
    const cause = error instanceof ProviderError ? retryCauseOf(error) : 'failed_attempt'
    const plan = retryPlan(engine.settings.backoff, cause, {attempts: row.attempts + (attempted ? 1 : 0), waits: row.waits}, engine.store.clock.now())
    const errorCode = waitReason(CONTROL_CODES.receiptUnavailable, attempted)
    const retried = await engine.store.outbox.retryLater(row.id, token, {errorCode, error: message, ...plan, attempted})
    if (retried.outcome === 'lease_lost') return {outcome: 'lease_lost'}
    engine.log.warn({outboxId: row.id, code: CONTROL_CODES.receiptUnavailable}, `Edge Worker control audit will retry: ${message}`)
    return {outcome: retried.outcome === 'failed' ? 'failed' : 'retried', code: CONTROL_CODES.receiptUnavailable, message}
  }
  if (receipt === null) return fail(CONTROL_CODES.receiptNotFound, 'the host has no receipt for this mutation; it was never applied')

  const valid = validateReceipt(receipt, {mutationId: row.id, scriptName: row.script_name!, payload})
  if ('problem' in valid) return fail(CONTROL_CODES.receiptInvalid, `the control receipt was refused: ${valid.problem}`)
  try {
    const completed = await engine.store.controlAudits.complete(row.id, token, controlAuditEntry(row, payload, valid))
    if (!completed) return {outcome: 'lease_lost'}
    engine.log.info({outboxId: row.id, operation: payload.operation, noop: valid.noop}, `Edge Worker control mutation completed: ${payload.operation}`)
    return {outcome: 'completed', current: valid.current, noop: valid.noop, stamp: completed.stamp, row: completed}
  } catch (error) {
    if (messageOf(error) === AUDIT_ID_CONFLICT) return fail(CONTROL_CODES.auditConflict, AUDIT_ID_CONFLICT)
    throw error
  }
}

/**
 * The reason a retried control row records: `code`, or — when the host was never reached —
 * edge_host_unreachable, as a deploy's row does, so that the first pass to find the host answering
 * again makes it due at once (../pass/host-wake.ts) instead of at the end of its ladder's step.
 */
function waitReason(code: string, attempted: boolean): string {
  return attempted ? code : EDGE_HOST_UNREACHABLE
}

/** A completed control row's attempts and waits so far: the ladder of its acknowledgement's retries. */
export type AckCounts = Pick<OutboxRow, 'attempts' | 'waits'>

/**
 * Sends control.receipt.ack for a completed row; the host must answer exactly {"acknowledged": true}.
 * A failure retries by the engine's rule (../retry.ts, control_receipt_ack_failed): a host that could
 * not answer is waited for, another answer is a failed attempt. Returns whether the receipt is
 * acknowledged now.
 */
export async function acknowledgeReceipt(
  engine: Engine,
  provider: EdgeProvider,
  stamp: ClaimStamp,
  row: AckCounts,
): Promise<'acknowledged' | 'rescheduled' | 'failed' | 'lost'> {
  let problem: string
  let cause: RetryCause = 'failed_attempt'
  let attempted = true
  try {
    const answer = await provider.acknowledgeReceipt(stamp.id)
    if (canonicalJson(answer) === '{"acknowledged":true}') {
      return (await engine.store.controlAudits.stopAcks(stamp, {errorCode: null, error: null, attempted: true})) ? 'acknowledged' : 'lost'
    }
    problem = 'the host did not answer exactly {"acknowledged": true}'
  } catch (error) {
    problem = messageOf(error)
    attempted = askedHost(error)
    if (error instanceof ProviderError) cause = retryCauseOf(error)
  }
  const message = `the control receipt acknowledgement failed: ${problem}`
  const plan = retryPlan(engine.settings.backoff, cause, {attempts: row.attempts + (attempted ? 1 : 0), waits: row.waits}, engine.store.clock.now())
  const outcome = await engine.store.controlAudits.retryAck(stamp, {
    errorCode: waitReason(CONTROL_CODES.ackFailed, attempted),
    error: message,
    ...plan,
    attempted,
  })
  if (outcome !== 'lost')
    engine.log.warn(
      {outboxId: stamp.id, code: CONTROL_CODES.ackFailed},
      `Edge Worker control receipt ack ${outcome === 'failed' ? 'failed' : 'will retry'}: ${problem}`,
    )
  return outcome
}

/** The audit row of a completed mutation: deterministic id = the outbox id; digests only, as the command. */
function controlAuditEntry(row: OutboxRow, payload: ControlPayload, receipt: ValidReceipt): AuditEntryInput {
  return auditEntry({
    id: row.id,
    action: receipt.noop ? `${payload.operation}.noop` : payload.operation,
    resource: {type: 'edge_worker', id: row.worker_id ?? ''},
    actor: payload.actor,
    authMethod: 'control_mutation',
    digest: payload.commandDigest,
    facts: {
      operation: payload.operation,
      script_name: row.script_name,
      mutation_id: row.id,
      command: payload.command,
      current: receipt.current,
    } as AuditEntryInput['facts'],
  })
}
