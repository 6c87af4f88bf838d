// The deploy order, in one place (docs/scheduling.md "Which deploy wins"): a Worker's versions are
// ordered by creation (WorkerRepository.createVersion keeps created_at strictly increasing per
// Worker), and a deploy row yields — settles `cancelled` with `deploy_superseded`, uploading nothing —
// once a newer version of its Worker has a deploy row that is queued, running, completed or uncertain.
import type {ExpressionBuilder} from 'kysely'
import type {StoreContext} from '../context.js'
import type {Database, EdgeWorkerVersionsTable, OutboxStatus, VersionRow} from '../schema.js'

/** The newer deploy a row yields to: its version, and its deploy row (null: the Worker already serves that version). */
export interface NewerDeploy {
  versionId: string
  outboxId: string | null
}

/** Statuses of a newer version's deploy row that make older rows yield: it is queued, running, on the host, or may be. */
const WINNING_STATUSES: OutboxStatus[] = ['pending', 'deferred', 'leased', 'completed', 'uncertain']

/** Whether version `a` of a Worker was created after version `b` (the Worker's deploy order). */
export function isNewer(a: Pick<VersionRow, 'id' | 'created_at'>, b: Pick<VersionRow, 'id' | 'created_at'>): boolean {
  return a.created_at > b.created_at || (a.created_at === b.created_at && a.id > b.id)
}

/**
 * The ordering rule, in one place: the newest deploy row of a version created after `version`
 * whose status says it is queued, running, on the host or may be (WINNING_STATUSES). A newer
 * version's row that failed or was cancelled never reached the host and does not count.
 */
export async function newerDeployOf(ctx: StoreContext, version: Pick<VersionRow, 'id'>): Promise<NewerDeploy | undefined> {
  return (await newerDeploysOf(ctx, [version.id])).get(version.id)
}

/**
 * The ordering rule for many versions in one statement: version id → the newer deploy it yields to
 * (absent: none). Per target it walks the Worker's newer versions newest first
 * (edge_worker_versions_worker_order) and probes each one's deploy rows by version
 * (edge_worker_outbox_version), so its cost follows the newer versions, not the Worker's history of
 * deploy rows.
 */
export async function newerDeploysOf(ctx: StoreContext, versionIds: readonly string[]): Promise<Map<string, NewerDeploy>> {
  if (versionIds.length === 0) return new Map()
  const newest = (eb: ExpressionBuilder<Database & {target: EdgeWorkerVersionsTable}, 'target'>) =>
    eb
      .selectFrom('edge_worker_versions as v')
      .innerJoin('edge_worker_outbox as o', 'o.version_id', 'v.id')
      .whereRef('v.worker_id', '=', 'target.worker_id')
      .where((newer) => newer(newer.refTuple('v.created_at', 'v.id'), '>', newer.refTuple('target.created_at', 'target.id')))
      .where('o.operation', '=', 'deploy')
      .whereRef('o.worker_id', '=', 'v.worker_id')
      .where('o.status', 'in', WINNING_STATUSES)
      .orderBy('v.created_at', 'desc')
      .orderBy('v.id', 'desc')
      .limit(1)
  const rows = await ctx.db
    .selectFrom('edge_worker_versions as target')
    .where('target.id', 'in', [...new Set(versionIds)])
    .select((eb) => ['target.id', newest(eb).select('o.id').as('outbox_id'), newest(eb).select('o.version_id').as('version_id')])
    .execute()
  return new Map(rows.flatMap((row) => (row.outbox_id && row.version_id ? [[row.id, {versionId: row.version_id, outboxId: row.outbox_id}]] : [])))
}

/** Why a deploy row yields: the message of its `deploy_superseded` settle, audit row and log line. */
export function supersededMessage(newerVersionId: string): string {
  return `version ${newerVersionId} of the Worker is newer; this deploy yields to it`
}
