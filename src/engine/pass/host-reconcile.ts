// Host reconcile (Host 調解迴圈): retry pending host retirements and retire scripts the store no
// longer owns — the rules live in ../retire/host-reconcile.ts; this lane runs them once per pass and
// counts each script attempted. Confirming lost backup fences is host reconcile too, but the pass runs
// it before every lane (../fence/confirm.ts via run-pass.ts) so a lifted fence reopens this pass's gate.
import {runHostReconcile} from '../retire/host-reconcile.js'
import type {Lane, RowOutcome} from './lane.js'

const COUNTED_AS = {retired: 'completed', pending: 'retried', skipped: 'skipped', protected: 'skipped'} as const satisfies Record<string, RowOutcome>

export const hostReconcileLane: Lane = async (run) => {
  const result = await runHostReconcile(run.engine, {shouldStop: run.shouldStop})
  if (result.skipped) return run.skip(result.skipped)
  for (const script of result.scripts) {
    run.counts.claimed++
    run.counts[COUNTED_AS[script.outcome]]++
  }
}
