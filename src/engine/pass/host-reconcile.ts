// Host reconcile: retry pending host retirements and retire scripts the store no
// longer owns — the rules live in ../retire/host-reconcile.ts; this lane runs them once per pass and
// counts each script attempted. While a restore is pending it verifies the restore instead
// (../backup/verify.ts: redeploy what the host lacks, then the same host reconcile, then open the
// gate). Confirming lost backup fences is host reconcile too, but the pass runs it before every
// lane (../fence/confirm.ts via run-pass.ts) so a lifted fence reopens this pass's gate.
import {deployRowResult} from '../deploy/row-result.js'
import {runHostReconcile, type ScriptOutcome} from '../retire/host-reconcile.js'
import {DONE, type RowResult} from '../row-result.js'
import {catchUpHosts} from '../hosts/catch-up.js'
import type {DeployTaskResult} from '../deploy/task.js'
import {tally, type Lane, type LaneRun} from './lane.js'

/** A script the lane attempted, as a row's result: a retirement still pending is retried by a later pass; one out of time or protected by a Worker row is left. */
function scriptResult(script: ScriptOutcome): RowResult {
  switch (script.outcome) {
    case 'retired':
      return DONE
    case 'pending':
      return {outcome: 'requeue_after', code: script.code ?? 'retirement_pending', message: `the retirement of ${script.scriptName} is retried by a later pass`}
    case 'skipped':
    case 'protected':
      return {outcome: 'skipped', reason: script.outcome}
  }
}

export const hostReconcileLane: Lane = async (run) => {
  if (run.scope && (await run.engine.store.kit.getGates(run.scope)).restore_pending) {
    // Loaded only while a restore is pending: it brings the deploy task with it.
    const {verifyRestore} = await import('../backup/verify.js')
    const verification = await verifyRestore(run.engine, {
      shouldStop: run.shouldStop,
      onRedeployed: (result) => {
        run.counts.claimed++
        tally(run, deployRowResult(result))
      },
    })
    run.counts.claimed += verification.retired.length
    run.counts.completed += verification.retired.length
    run.note(verification.state === 'verified' ? 'restore verified; the restore gate is open' : `restore pending: ${verification.message}`)
    return
  }
  const result = await runHostReconcile(run.engine, {shouldStop: run.shouldStop})
  if (result.skipped) return run.skip(result.skipped)
  for (const script of result.scripts) {
    run.counts.claimed++
    tally(run, scriptResult(script))
  }
  if (run.scope) await catchUpKitHosts(run, run.scope)
}

/** A kit of several hosts: each is brought current and confirmed (../hosts/catch-up.ts); what is left is noted. */
async function catchUpKitHosts(run: LaneRun, scope: string): Promise<void> {
  const onRedeployed = (result: DeployTaskResult) => {
    run.counts.claimed++
    tally(run, deployRowResult(result))
  }
  for (const host of await catchUpHosts(run.engine, scope, {shouldStop: run.shouldStop, onRedeployed})) {
    if (host.state === 'unreachable') run.note(`host ${host.host} did not answer (${host.error}); it is brought current when it does`)
    else if (host.state === 'behind')
      run.note(`host ${host.host} is not current (${host.error ?? `${host.lacking} release(s) or control state(s) differ`}); it stays not ready`)
  }
}
