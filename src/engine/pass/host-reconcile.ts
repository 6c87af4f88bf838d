// Host reconcile: retry pending host retirements and retire scripts the store no
// longer owns — the rules live in ../retire/host-reconcile.ts; this lane runs them once per pass and
// counts each script attempted. While a restore is pending it verifies the restore instead
// (../backup/verify.ts: redeploy what the host lacks, then the same host reconcile, then open the
// gate). Confirming lost backup fences is host reconcile too, but the pass runs it before every
// lane (../fence/confirm.ts via run-pass.ts) so a lifted fence reopens this pass's gate.
import {runHostReconcile} from '../retire/host-reconcile.js'
import type {Lane, RowOutcome} from './lane.js'

const COUNTED_AS = {retired: 'completed', pending: 'retried', skipped: 'skipped', protected: 'skipped'} as const satisfies Record<string, RowOutcome>
const REDEPLOY_COUNTED_AS: Record<string, RowOutcome> = {
  completed: 'completed',
  superseded: 'completed',
  failed: 'failed',
  uncertain: 'uncertain',
  retry: 'retried',
}

export const hostReconcileLane: Lane = async (run) => {
  if (run.scope && (await run.engine.store.kit.getGates(run.scope)).restore_pending) {
    // Loaded only while a restore is pending: it brings the deploy task with it.
    const {verifyRestore} = await import('../backup/verify.js')
    const verification = await verifyRestore(run.engine, {shouldStop: run.shouldStop})
    for (const redeploy of verification.redeployed) {
      run.counts.claimed++
      run.counts[REDEPLOY_COUNTED_AS[redeploy.outcome] ?? 'skipped']++
    }
    run.counts.claimed += verification.retired.length
    run.counts.completed += verification.retired.length
    run.note(verification.state === 'verified' ? 'restore verified; the restore gate is open' : `restore pending: ${verification.message}`)
    return
  }
  const result = await runHostReconcile(run.engine, {shouldStop: run.shouldStop})
  if (result.skipped) return run.skip(result.skipped)
  for (const script of result.scripts) {
    run.counts.claimed++
    run.counts[COUNTED_AS[script.outcome]]++
  }
}
