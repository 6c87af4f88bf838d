// The maintenance gate (`maintenance on|off|status`): while on — and while a restore is pending —
// no deploy row is enqueued (the check itself lives in ./gates.ts). Deploys
// already queued keep running; this gate stops new work, the backup fence stops execution.
import {KitError} from '../errors.js'
import {SYSTEM_ACTOR, type AuditActor, type GateRow} from '../store/index.js'
import type {Engine} from './context.js'
import {FENCE_ACTIONS, fenceAuditEntry, fenceView, type FenceView} from './fence/fence.js'
import {requireProvider} from './provider.js'

export interface GatesStatus {
  scope: string
  maintenance: {on: boolean; reason: string | null}
  restorePending: {on: boolean; reason: string | null}
  /** The store's open backup fence (execution gate closed), if any. */
  fence: FenceView | null
  updatedAt: string | null
}

export async function setMaintenance(engine: Engine, input: {on: boolean; reason?: string; actor?: AuditActor}): Promise<GatesStatus> {
  const {scope} = await requireProvider(engine, `turn maintenance ${input.on ? 'on' : 'off'}`)
  const reason = input.reason?.trim() ?? ''
  if (input.on && !reason) throw new KitError('usage', 'maintenance on needs a reason (--reason)')
  if (reason.length > 200 || /[\r\n]/.test(reason)) throw new KitError('usage', '--reason must be one line of at most 200 characters')
  const gates = await engine.store.kit.setGate(scope, 'maintenance', input.on ? reason : null)
  const action = input.on ? FENCE_ACTIONS.maintenanceOn : FENCE_ACTIONS.maintenanceOff
  await engine.store.audit.append(
    fenceAuditEntry(action, scope, input.actor ?? SYSTEM_ACTOR, {scope, reason: input.on ? reason : null}, String(gates.updated_at)),
  )
  engine.log.info({scope, maintenance: input.on}, `maintenance ${input.on ? 'on' : 'off'}`)
  return statusOf(engine, scope, gates)
}

export async function gatesStatus(engine: Engine): Promise<GatesStatus> {
  const {scope} = await requireProvider(engine, 'read the maintenance gate')
  return statusOf(engine, scope, await engine.store.kit.getGates(scope))
}

async function statusOf(engine: Engine, scope: string, gates: GateRow): Promise<GatesStatus> {
  const fence = await engine.store.kit.openFence(scope)
  return {
    scope,
    maintenance: {on: gates.maintenance, reason: gates.reasons.maintenance ?? null},
    restorePending: {on: gates.restore_pending, reason: gates.reasons.restore_pending ?? null},
    fence: fence ? fenceView(fence) : null,
    updatedAt: gates.updated_at === null ? null : new Date(Number(gates.updated_at)).toISOString(),
  }
}
