// What every fence operation shares: the view a command prints, the provider it needs, how a failed
// host call becomes one operator-facing line, and the audit rows fences write.
import {KitError} from '../../errors.js'
import {ProviderError} from '../../provider/types.js'
import {auditEntry, type AuditActor, type AuditEntryInput, type FenceRow, type JsonObject} from '../../store/index.js'

export interface FenceView {
  id: string
  scope: string
  /** requested: recorded, not yet acknowledged by the host; active: the host holds it; ended: lifted. */
  state: 'requested' | 'active' | 'ended'
  reason: string
  ttlSeconds: number
  beganAt: string
  /** When the host lifts it by itself (the host's clock, once acknowledged). */
  expiresAt: string
  hostAckedAt: string | null
  endedAt: string | null
  /** ended (by an operator), expired (the host lifted it at its TTL), never_acknowledged, missing_on_host, begin_failed, restored (the backup's own fence, closed in the restored store). */
  endReason: string | null
}

export function fenceView(row: FenceRow): FenceView {
  const iso = (ms: number | null) => (ms === null ? null : new Date(Number(ms)).toISOString())
  return {
    id: row.id,
    scope: row.scope,
    state: row.state as FenceView['state'],
    reason: row.reason,
    ttlSeconds: Number(row.ttl_seconds),
    beganAt: iso(row.began_at)!,
    expiresAt: iso(row.expires_at)!,
    hostAckedAt: iso(row.host_acked_at),
    endedAt: iso(row.ended_at),
    endReason: row.end_reason,
  }
}

/** A failed host call as one line: unreachable (nothing answered) or the host's own refusal. */
export function hostCallError(error: unknown, action: string, consequence = ''): KitError {
  const suffix = consequence ? `; ${consequence}` : ''
  if (error instanceof ProviderError && error.status !== undefined) return new KitError('host_error', `${action}: ${error.message}${suffix}`, error.code)
  if (error instanceof ProviderError) return new KitError('host_unreachable', `${action}: ${error.message}${suffix}`, error.code)
  return new KitError('host_unreachable', `${action}: ${(error as Error).message}${suffix}`)
}

/** True when the host answered that it never had the fence. */
export function isFenceUnknownToHost(error: unknown): boolean {
  return error instanceof ProviderError && error.status === 404
}

export const FENCE_ACTIONS = {
  begun: 'backup_fence.begun',
  ended: 'backup_fence.ended',
  /** A reconcile pass found the store and the host disagreeing about a fence and settled it. */
  confirmed: 'backup_fence.confirmed',
  maintenanceOn: 'maintenance.enabled',
  maintenanceOff: 'maintenance.disabled',
} as const

export function fenceAuditEntry(
  action: (typeof FENCE_ACTIONS)[keyof typeof FENCE_ACTIONS],
  resourceId: string,
  actor: AuditActor,
  facts: JsonObject,
  discriminator = '',
): AuditEntryInput {
  return auditEntry({
    action,
    resource: {type: action.startsWith('maintenance') ? 'kit_scope' : 'backup_fence', id: resourceId},
    actor,
    discriminator,
    reasonCode: typeof facts.outcome === 'string' ? facts.outcome : null,
    facts,
  })
}
