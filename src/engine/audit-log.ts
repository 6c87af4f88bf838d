// The audit log as `audit list` reads it.
import type {AuditListFilter, AuditRow} from '../store/index.js'
import type {Engine} from './context.js'

/** Audit rows, newest first. */
export function listAuditRows(engine: Engine, filter: AuditListFilter): Promise<AuditRow[]> {
  return engine.store.audit.list(filter)
}
