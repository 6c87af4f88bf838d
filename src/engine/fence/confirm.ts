// Lost-fence confirmation (part of host reconcile): the store and the host must agree about the
// scope's backup fence, whichever of them missed a step.
// - The host holds the store's `requested` fence: the acknowledgement was lost → record it.
// - The host lifted the store's open fence (its TTL ran out after a crashed CLI, or an `end` whose
//   store write was lost) → record how, which reopens the execution gate.
// - The host never had the store's fence (a begin that never arrived) → close it once the begin
//   could no longer be in flight.
// - The host holds a fence the store closed → lift it on the host; one the store never heard of
//   (a store restored from an older backup) → adopt it, so the gate matches the frozen host.
import type {EdgeProvider, HostFence} from '../../provider/types.js'
import {SYSTEM_ACTOR, type FenceRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {FENCE_ACTIONS, fenceAuditEntry, isFenceUnknownToHost} from './fence.js'

export type FenceOutcome = 'ack_confirmed' | 'expired_on_host' | 'ended_on_host' | 'never_acknowledged' | 'missing_on_host' | 'lifted_on_host' | 'adopted'

export interface FenceConfirmation {
  fenceId: string
  outcome: FenceOutcome
}

export async function confirmFences(engine: Engine, provider: EdgeProvider, scope: string, signal?: AbortSignal): Promise<FenceConfirmation[]> {
  const {store} = engine
  const confirmations: FenceConfirmation[] = []
  const record = async (fenceId: string, outcome: FenceOutcome, facts: Record<string, string | number | null> = {}) => {
    confirmations.push({fenceId, outcome})
    engine.log.warn({fenceId, outcome, scope}, `Edge Worker backup fence ${fenceId} confirmed: ${outcome}`)
    await store.audit.append(fenceAuditEntry(FENCE_ACTIONS.confirmed, fenceId, SYSTEM_ACTOR, {outcome, scope, ...facts}, outcome))
  }

  const host = await provider.fenceStatus(signal)
  const open = await store.kit.openFence(scope)
  if (open) {
    const held =
      host.active?.fenceId === open.id ? host.active : (host.recent.find((fence) => fence.fenceId === open.id) ?? (await provider.getFence(open.id, signal)))
    const outcome = await settleOpenFence(engine, open, held)
    if (outcome) await record(open.id, outcome, held?.liftedAt ? {lifted_at: held.liftedAt} : {})
  }

  const active = host.active
  if (active && active.fenceId !== open?.id) {
    const known = await store.kit.getFence(active.fenceId)
    if (known?.ended_at != null) {
      await provider.endFence(active.fenceId, signal).catch((error: unknown) => {
        if (!isFenceUnknownToHost(error)) throw error
      })
      await record(active.fenceId, 'lifted_on_host')
    } else if (!known && (await adopt(engine, scope, active))) {
      await record(active.fenceId, 'adopted', {expires_at: active.expiresAt})
    }
  }
  return confirmations
}

async function settleOpenFence(engine: Engine, open: FenceRow, held: HostFence | null): Promise<FenceOutcome | null> {
  const {store, settings} = engine
  if (held && held.liftedAt === null) {
    if (open.state !== 'requested') return null
    return (await store.kit.ackFence(open.id, held.expiresAt)) ? 'ack_confirmed' : null
  }
  if (held) {
    const outcome = held.liftReason === 'expired' ? 'expired_on_host' : 'ended_on_host'
    return (await store.kit.endFence(open.id, held.liftReason === 'expired' ? 'expired' : 'ended')) ? outcome : null
  }
  if (open.state === 'requested') {
    // A `fence begin` may still be waiting for the host's answer: give it the whole request timeout.
    const inFlightUntil = Number(open.began_at) + settings.provider.connect_timeout_ms + settings.provider.read_timeout_ms
    if (store.clock.now() < inFlightUntil) return null
    return (await store.kit.endFence(open.id, 'never_acknowledged')) ? 'never_acknowledged' : null
  }
  return (await store.kit.endFence(open.id, 'missing_on_host')) ? 'missing_on_host' : null
}

async function adopt(engine: Engine, scope: string, fence: HostFence): Promise<boolean> {
  try {
    await engine.store.kit.beginFence({
      id: fence.fenceId,
      scope,
      reason: `adopted from the edge host: ${fence.reason}`,
      ttlSeconds: Math.max(1, Math.round((fence.expiresAt - fence.startedAt) / 1000)),
      beganAt: fence.startedAt,
      expiresAt: fence.expiresAt,
      hostAckedAt: engine.store.clock.now(),
    })
    return true
  } catch {
    // Another writer opened a fence meanwhile; the next pass looks again.
    return false
  }
}
