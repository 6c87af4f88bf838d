// The recovery lane: deploy rows that need a dispatcher — due rows the passes
// own, rows whose enqueuer let them stall past the grace, expired leases — leased a batch at a time
// and run in-process. Claims nothing while the execution gate is closed. Rows waiting for a host that
// answers again are made due first (./host-wake.ts).
import {dispatchDeploys} from './deploy-dispatch.js'
import {wakeRowsWaitingForHost} from './host-wake.js'
import type {Lane} from './lane.js'

export const recoveryLane: Lane = async (run) => {
  if (run.gate.closed) return run.skip(run.gate.message)
  const {store, owner, settings} = run.engine
  await wakeRowsWaitingForHost(run, 'deploy')
  const claim = () =>
    store.sweeps.claimRecoverableDeployments({
      scope: run.scope,
      owner,
      limit: settings.recovery.batch_size,
      graceSeconds: settings.recovery.dispatch_grace_seconds,
      leaseSeconds: settings.deploy.lease_seconds,
    })
  await dispatchDeploys(run, claim, {repeat: true, handBack: {status: 'pending'}})
}
