// Deferred republish: deploys enqueued (or pushed back) while a backup fence was open are `deferred`
// (last error code `edge_host_fenced`) and wait here until the gate opens. Every due one is leased
// at once, oldest first (no batch cap: a backup can defer more than a batch, and all of it is due
// together), which accepts its dispatch and clears the code; one the lane does not get to goes back
// to `deferred` with it.
import {EDGE_HOST_FENCED} from '../../protocol/api/common.js'
import {dispatchDeploys} from './deploy-dispatch.js'
import type {Lane} from './lane.js'

export const deferredLane: Lane = async (run) => {
  if (run.gate.closed) return run.skip(run.gate.message)
  const {store, owner, settings} = run.engine
  const claim = () =>
    store.sweeps.claimDeferredDeployments({
      scope: run.scope,
      owner,
      leaseSeconds: settings.deploy.lease_seconds,
    })
  await dispatchDeploys(run, claim, {repeat: false, handBack: {status: 'deferred', errorCode: EDGE_HOST_FENCED}})
}
