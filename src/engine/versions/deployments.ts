// `deployments list|status`: which versions served a Worker, and since when (wrangler's deployments
// list|status). A deployment is one version at 100 %, or two with their percentages (a gradual
// deployment: the version row's split), read from the versions whose deploy completed.
import type {VersionRow, WorkerRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {findWorker} from '../workers.js'

export interface DeploymentRecord {
  /** When the deploy completed. */
  deployedAt: number
  versions: Array<{versionId: string; percentage: number; tag: string | null; releaseGeneration: string}>
  /** `rollback` when it was a rollback's copy (of `rollbackOf`), else `deploy`. */
  kind: 'deploy' | 'rollback'
  rollbackOf: string | null
  author: string | null
  message: string | null
  /** The deployment the Worker serves now. */
  current: boolean
}

export interface WorkerDeployments {
  workerId: string
  scriptName: string
  departmentId: string
  /** Newest first. */
  deployments: DeploymentRecord[]
}

export async function listDeployments(engine: Engine, handle: string): Promise<WorkerDeployments> {
  const worker = await findWorker(engine, handle)
  const served = (await engine.store.workers.listVersions(worker.id)).filter((version) => version.deployed_at !== null)
  return {
    workerId: worker.id,
    scriptName: worker.script_name,
    departmentId: worker.department_id,
    // Newest deploy first; on a tie of clocks, the later version (listVersions is in deploy order; the sort is stable).
    deployments: served
      .toReversed()
      .map((version) => deploymentOf(worker, version, served))
      .sort((a, b) => b.deployedAt - a.deployedAt),
  }
}

/** The deployment the Worker serves now; null when it serves none (never deployed, or retired). */
export async function deploymentStatus(
  engine: Engine,
  handle: string,
): Promise<Omit<WorkerDeployments, 'deployments'> & {deployment: DeploymentRecord | null}> {
  const {deployments, ...worker} = await listDeployments(engine, handle)
  return {...worker, deployment: deployments.find((deployment) => deployment.current) ?? null}
}

function deploymentOf(worker: WorkerRow, version: VersionRow, served: VersionRow[]): DeploymentRecord {
  const {split} = version
  const beside = split && served.find((other) => other.id === split.beside.version_id)
  return {
    deployedAt: Number(version.deployed_at),
    versions: [
      {versionId: version.id, percentage: split?.percentage ?? 100, tag: version.tag, releaseGeneration: version.release_generation},
      ...(split
        ? [
            {
              versionId: split.beside.version_id,
              percentage: split.beside.percentage,
              tag: beside?.tag ?? null,
              releaseGeneration: split.beside.release_generation,
            },
          ]
        : []),
    ],
    kind: version.rollback_of === null ? 'deploy' : 'rollback',
    rollbackOf: version.rollback_of,
    author: version.author,
    message: version.message,
    current: worker.current_version_id === version.id && worker.retired_at === null,
  }
}
