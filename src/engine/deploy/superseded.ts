// The one result of a deploy row settled `deploy_superseded`, whether its task saw the newer version
// (./task.ts) or the claim did (../pass/deploy-dispatch.ts). A module of its own so that the lanes
// reach it without loading the deploy pipeline, which they import only once a row is dispatched.
import {DEPLOY_SUPERSEDED, supersededMessage, type NewerDeploy} from '../../store/index.js'
import type {Engine} from '../context.js'
import type {DeployTaskResult} from './task.js'

/** Logs the settlement and returns the task's result for it. */
export function supersededResult(engine: Engine, outboxId: string, newer: NewerDeploy): DeployTaskResult {
  const message = supersededMessage(newer.versionId)
  engine.log.info({outboxId, code: DEPLOY_SUPERSEDED, newerVersionId: newer.versionId}, `Edge Worker deployment superseded: ${message}`)
  return {outcome: 'superseded', code: DEPLOY_SUPERSEDED, message, newerVersionId: newer.versionId}
}
