// The two gates of the on-prem kit, each decided in one place:
// - the execution gate (closed while a backup fence is open, or while no provider can be built):
//   a deploy task answers `retry_later` before it takes any lease, and sweeps claim nothing;
// - the enqueue gates (maintenance, restore pending): no deploy row is enqueued (enqueueDeploy and a
//   waiting `deploy` refuse with `gate_closed`).
import {KitError} from '../errors.js'
import type {Engine} from './context.js'
import {PROVIDER_UNAVAILABLE, type ProviderResolution} from './provider.js'

export const EXECUTION_FENCED = 'Edge Workers execution is fenced'

export type ExecutionGate = {closed: true; message: string} | {closed: false; scope: string}

export async function executionGate(engine: Engine, resolution: ProviderResolution): Promise<ExecutionGate> {
  if (resolution.status === 'unavailable') return {closed: true, message: PROVIDER_UNAVAILABLE}
  const scope = resolution.status === 'ready' ? resolution.scope : engine.settings.provider.scope
  if (scope && (await engine.store.kit.openFence(scope))) return {closed: true, message: EXECUTION_FENCED}
  return {closed: false, scope}
}

/** Refuses (`gate_closed`: `edge_workers_maintenance` or `edge_workers_restore_pending`) while maintenance is on or a restore is pending for the scope. */
export async function assertEnqueueGatesOpen(engine: Engine, scope: string): Promise<void> {
  const gates = await engine.store.kit.getGates(scope)
  if (gates.restore_pending) {
    throw new KitError(
      'gate_closed',
      `409 edge_workers_restore_pending: a restore is pending verification (${gates.reasons.restore_pending ?? 'run a reconcile pass'})`,
      'edge_workers_restore_pending',
    )
  }
  if (gates.maintenance) {
    throw new KitError(
      'gate_closed',
      `409 edge_workers_maintenance: maintenance is on (${gates.reasons.maintenance ?? 'no reason given'})`,
      'edge_workers_maintenance',
    )
  }
}
