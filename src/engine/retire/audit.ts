// The audit rows retirement writes, as the reference's table lists them. Ids are deterministic, so a
// retried retirement re-writes the same rows as no-ops (and keeps the first row's time, which is how
// a retirement knows how long it has been failing).
import {canonicalDigest} from '../../canonical-json.js'
import {deterministicId, type AuditEntryInput, type JsonObject, type ServiceAccountRow} from '../../store/index.js'

export const RETIREMENT_ACTIONS = {
  serviceAccountDeleted: 'service_account.deleted',
  /** Before any attempt on the script in a scope: "this scope was acted on". */
  scriptDeleted: 'department.worker_script_deleted',
  /** On-prem: after the host retired the department's Worker. */
  workerRetired: 'department.worker_retired',
  /** An orphan's script was retired in a scope (the store's ORPHAN_CONFIRMATION_ACTION). */
  scriptNeutralized: 'department.worker_script_neutralized',
} as const

/** Who deleted the department: the operator running the command, or the system. */
export interface AuditActor {
  type: string
  id: string
}

export const SYSTEM_ACTOR: AuditActor = {type: 'system', id: ''}

export function serviceAccountDeletedEntry(account: ServiceAccountRow, actor: AuditActor): AuditEntryInput {
  const deletion = {deleted: true, reason: 'department_deleted', service_account_id: account.id}
  return {
    id: deterministicId(RETIREMENT_ACTIONS.serviceAccountDeleted, account.id),
    action: RETIREMENT_ACTIONS.serviceAccountDeleted,
    resource_type: 'service_account',
    resource_id: account.id,
    actor_type: actor.type,
    actor_id: actor.id,
    auth_method: 'department_delete',
    result: 'success',
    digest: canonicalDigest(deletion),
    facts: {...deletion, department_id: account.department_id},
  }
}

/** The system rows about a Worker; `scope` becomes the reason code of the per-scope ones. */
export function workerSystemEntry(action: Exclude<(typeof RETIREMENT_ACTIONS)[keyof typeof RETIREMENT_ACTIONS], 'service_account.deleted'>, workerId: string, facts: JsonObject, scope: string | null): AuditEntryInput {
  return {
    id: deterministicId(action, workerId, scope ?? ''),
    action,
    resource_type: 'edge_worker',
    resource_id: workerId,
    actor_type: SYSTEM_ACTOR.type,
    actor_id: SYSTEM_ACTOR.id,
    auth_method: 'system',
    result: 'success',
    reason_code: scope,
    facts,
  }
}
