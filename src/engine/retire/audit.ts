// The audit rows retirement writes: service_account.deleted, department.worker_script_deleted,
// department.worker_retired, department.worker_script_neutralized. Ids are deterministic, so a
// retried retirement re-writes the same rows as no-ops (and keeps the first row's time, which is how
// a retirement knows how long it has been failing).
import {auditEntry, SYSTEM_ACTOR, type AuditActor, type AuditEntryInput, type JsonObject, type ServiceAccountRow} from '../../store/index.js'

export const RETIREMENT_ACTIONS = {
  serviceAccountDeleted: 'service_account.deleted',
  /** Before any attempt on the script in a scope: "this scope was acted on". */
  scriptDeleted: 'department.worker_script_deleted',
  /** On-prem: after the host retired the department's Worker. */
  workerRetired: 'department.worker_retired',
  /** An orphan's script was retired in a scope (the store's ORPHAN_CONFIRMATION_ACTION). */
  scriptNeutralized: 'department.worker_script_neutralized',
} as const

export function serviceAccountDeletedEntry(account: ServiceAccountRow, actor: AuditActor): AuditEntryInput {
  const deletion = {deleted: true, reason: 'department_deleted', service_account_id: account.id}
  return auditEntry({
    action: RETIREMENT_ACTIONS.serviceAccountDeleted,
    resource: {type: 'service_account', id: account.id},
    actor,
    authMethod: 'department_delete',
    digest: deletion,
    facts: {...deletion, department_id: account.department_id},
  })
}

/** The system rows about a Worker; `scope` becomes the reason code of the per-scope ones. */
export function workerSystemEntry(
  action: Exclude<(typeof RETIREMENT_ACTIONS)[keyof typeof RETIREMENT_ACTIONS], 'service_account.deleted'>,
  workerId: string,
  facts: JsonObject,
  scope: string | null,
): AuditEntryInput {
  return auditEntry({action, resource: {type: 'edge_worker', id: workerId}, actor: SYSTEM_ACTOR, discriminator: scope ?? '', reasonCode: scope, facts})
}
