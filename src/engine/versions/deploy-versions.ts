// `versions deploy <worker> <version>@<percentage>…` (wrangler's `versions deploy`): serves stored
// versions by the deployment rule of ./deployment-spec.ts. One version at 100 % is deployed again
// without a rebuild, through rollback's path (a new newest version, its audit row, the deploy task).
// A split of two versions passes the same rule — so a stateful Worker hears Cloudflare's refusal —
// and is then refused: this host serves one release of a script at a time (docs/gradual-deployments.md).
import {KitError} from '../../errors.js'
import type {AuditActor} from '../../store/index.js'
import type {Engine} from '../context.js'
import type {DeployStageOptions} from '../deploy/deploy-worker.js'
import {redeployStoredVersion, type RollbackOutcome} from '../deploy/rollback.js'
import {parseDeploymentSpec} from './deployment-spec.js'

export const DEPLOYMENT_CHANGED_ACTION = 'edge_worker.deployment_changed'
export const GRADUAL_SPLIT_UNSUPPORTED = 'gradual_split_unsupported'

export interface DeployVersionsRequest {
  departmentId: string
  /** `<version>@<percentage>` (the `%` optional), one or two. */
  specs: readonly string[]
  message?: string
  wait: boolean
  actor: AuditActor
}

export async function deployVersions(engine: Engine, request: DeployVersionsRequest, options: DeployStageOptions = {}): Promise<RollbackOutcome> {
  const choose = (versions: Parameters<typeof parseDeploymentSpec>[0]) => {
    const [only, second] = parseDeploymentSpec(versions, request.specs)
    if (second) {
      throw new KitError(
        'conflict',
        'this edge host serves one version of a Worker at a time; a percentage split is not supported yet: deploy one version at 100',
        GRADUAL_SPLIT_UNSUPPORTED,
      )
    }
    return only!.version
  }
  return redeployStoredVersion(
    engine,
    {...request, choose, action: DEPLOYMENT_CHANGED_ACTION, verb: 'deployed', defaultMessage: (target) => `deploy of ${target.id}`},
    options,
  )
}
