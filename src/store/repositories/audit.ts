// The append-only audit log. Ids are deterministic (see ../ids.ts deterministicId), so a replayed
// write is a no-op — unless it carries different facts, which means two writers disagree about what
// happened under one id: that is refused, never overwritten.
import {canonicalDigest, canonicalJson} from '../../canonical-json.js'
import type {StoreContext} from '../context.js'
import {deterministicId} from '../ids.js'
import {parseJsonObject, type AuditLogsTable, type AuditRow, type JsonObject} from '../schema.js'

/** An audit row as written: the table's columns, with `facts` as an object and the optional ones optional. */
export type AuditEntryInput = Omit<AuditLogsTable, 'reason_code' | 'digest' | 'facts' | 'created_at'> & {
  reason_code?: string | null
  digest?: string | null
  facts: JsonObject
}

/** Who acted: an operator (by login name) or the system (passes, lanes). */
export interface AuditActor {
  type: string
  id: string
}

export const SYSTEM_ACTOR: AuditActor = {type: 'system', id: ''}

export interface AuditEntrySpec {
  action: string
  resource: {type: string; id: string}
  actor: AuditActor
  /** The row id; by default deterministic over the action, the resource and `discriminator`. */
  id?: string
  /** What makes two rows of one action on one resource distinct (a scope, a state acted on). */
  discriminator?: string
  /** Default: `system` for the system actor, `cli` for an operator. */
  authMethod?: string
  result?: string
  reasonCode?: string | null
  facts: JsonObject
  /** The digest: a given hex string, or canonical JSON of a value (the facts, for `true`). */
  digest?: string | true | JsonObject
}

/** The one way an audit row is built: deterministic id, actor and auth method, canonical digests. */
export function auditEntry(spec: AuditEntrySpec): AuditEntryInput {
  const digest =
    spec.digest === undefined ? null : typeof spec.digest === 'string' ? spec.digest : canonicalDigest(spec.digest === true ? spec.facts : spec.digest)
  return {
    id: spec.id ?? deterministicId(spec.action, spec.resource.id, ...(spec.discriminator === undefined ? [] : [spec.discriminator])),
    action: spec.action,
    resource_type: spec.resource.type,
    resource_id: spec.resource.id,
    actor_type: spec.actor.type,
    actor_id: spec.actor.id,
    auth_method: spec.authMethod ?? (spec.actor.type === SYSTEM_ACTOR.type ? 'system' : 'cli'),
    result: spec.result ?? 'success',
    reason_code: spec.reasonCode ?? null,
    digest,
    facts: spec.facts,
  }
}

export interface AuditListFilter {
  action?: string
  resourceType?: string
  resourceId?: string
  /** Newest first; default 50. */
  limit?: number
}

export const AUDIT_ID_CONFLICT = 'audit id is already bound to different facts'

export class AuditRepository {
  constructor(private readonly ctx: StoreContext) {}

  /** Appends the entry; the same id with the same content again is a no-op reported as `duplicate`. */
  async append(entry: AuditEntryInput): Promise<{row: AuditRow; duplicate: boolean}> {
    return this.ctx.write(async ({db}) => {
      const candidate: AuditLogsTable = {
        ...entry,
        reason_code: entry.reason_code ?? null,
        digest: entry.digest ?? null,
        facts: canonicalJson(entry.facts),
        created_at: this.ctx.now(),
      }
      const inserted = await db
        .insertInto('edge_worker_audit_logs')
        .values(candidate)
        .onConflict((oc) => oc.column('id').doNothing())
        .returningAll()
        .executeTakeFirst()
      if (inserted) return {row: toAuditRow(inserted), duplicate: false}
      const existing = await db.selectFrom('edge_worker_audit_logs').selectAll().where('id', '=', entry.id).executeTakeFirstOrThrow()
      if (boundFacts(existing) !== boundFacts(candidate)) throw new Error(AUDIT_ID_CONFLICT)
      return {row: toAuditRow(existing), duplicate: true}
    })
  }

  async get(id: string): Promise<AuditRow | undefined> {
    const row = await this.ctx.db.selectFrom('edge_worker_audit_logs').selectAll().where('id', '=', id).executeTakeFirst()
    return row && toAuditRow(row)
  }

  async list(filter: AuditListFilter = {}): Promise<AuditRow[]> {
    const rows = await this.ctx.db
      .selectFrom('edge_worker_audit_logs')
      .selectAll()
      .$if(filter.action !== undefined, (q) => q.where('action', '=', filter.action!))
      .$if(filter.resourceType !== undefined, (q) => q.where('resource_type', '=', filter.resourceType!))
      .$if(filter.resourceId !== undefined, (q) => q.where('resource_id', '=', filter.resourceId!))
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(filter.limit ?? 50)
      .execute()
    return rows.map(toAuditRow)
  }
}

/** Everything an audit row asserts; only the time it was first written may differ on replay. */
function boundFacts(row: AuditLogsTable): string {
  const {created_at: _writtenAt, ...asserted} = row
  return canonicalJson(asserted)
}

function toAuditRow(row: AuditLogsTable): AuditRow {
  return {...row, facts: parseJsonObject(row.facts)}
}
