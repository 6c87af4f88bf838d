// `versions deploy <worker> <version>@<percentage>…` (wrangler's `versions deploy`): serves stored
// versions by the deployment rule of ./deployment-spec.ts, without a rebuild, through rollback's path
// (a new newest version carrying the split, its audit row, the deploy task). A split keeps one of the
// versions served now and uploads the other (docs/gradual-deployments.md); `deployments promote`
// serves the uploaded one — the Worker's current version — alone.
import {KitError} from '../../errors.js'
import type {AuditActor, VersionRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import type {DeployStageOptions} from '../deploy/deploy-worker.js'
import {redeployStoredVersion, type RollbackOutcome} from '../deploy/rollback.js'
import {planDeployment, parseDeploymentSpec, servedVersions} from './deployment-spec.js'

export const DEPLOYMENT_CHANGED_ACTION = 'edge_worker.deployment_changed'

export interface DeployVersionsRequest {
  departmentId: string
  /** `<version>@<percentage>` (the `%` optional), one or two. */
  specs: readonly string[]
  message?: string
  wait: boolean
  actor: AuditActor
}

export async function deployVersions(engine: Engine, request: DeployVersionsRequest, options: DeployStageOptions = {}): Promise<RollbackOutcome> {
  const choose = (versions: VersionRow[], current: VersionRow | undefined) => planDeployment(parseDeploymentSpec(versions, request.specs), versions, current)
  return redeployStoredVersion(
    engine,
    {...request, choose, action: DEPLOYMENT_CHANGED_ACTION, verb: 'deployed', defaultMessage: (target) => `deploy of ${target.id}`},
    options,
  )
}

/** `deployments promote <worker>`: the live split's current version (the one it rolls out) at 100 %. */
export async function promoteSplit(engine: Engine, request: Omit<DeployVersionsRequest, 'specs'>, options: DeployStageOptions = {}): Promise<RollbackOutcome> {
  const choose = (versions: VersionRow[], current: VersionRow | undefined) => {
    const served = servedVersions(versions, current)
    if (served.length < 2) throw new KitError('usage', 'no split is live: nothing to promote')
    // The current version is the one the split uploaded: the one being rolled out.
    return {target: served[0]!, split: null}
  }
  return redeployStoredVersion(
    engine,
    {...request, choose, action: DEPLOYMENT_CHANGED_ACTION, verb: 'promoted', defaultMessage: (target) => `promote ${target.id} to 100 %`},
    options,
  )
}
