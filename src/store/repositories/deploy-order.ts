// The deploy order, in one place (docs/scheduling.md "Which deploy wins"): a Worker's versions are
// ordered by creation (WorkerRepository.createVersion keeps created_at strictly increasing per
// Worker), and a deploy row yields — settles `cancelled` with `deploy_superseded`, uploading nothing —
// once a newer version of its Worker has a deploy row that is queued, running, completed or uncertain.
import {sql, type SelectQueryBuilder} from 'kysely'
import type {StoreContext} from '../context.js'
import type {Database, OutboxStatus, OutboxTable, VersionRow} from '../schema.js'

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
 * The ordering rule for many versions: version id → the newer deploy it yields to (absent: none).
 * Per target it walks the Worker's newer versions newest first (edge_worker_versions_worker_order)
 * and asks of each whether it has a winning deploy row — a probe by version id
 * (edge_worker_outbox_version) — so its cost follows the newer versions, not the Worker's history
 * of deploy rows, and the probe stays a probe whatever the planner's statistics say (a backlog is
 * queued faster than they refresh). A second statement names a row of each version found.
 */
export async function newerDeploysOf(ctx: StoreContext, versionIds: readonly string[]): Promise<Map<string, NewerDeploy>> {
  if (versionIds.length === 0) return new Map()
  const targets = await ctx.db
    .selectFrom('edge_worker_versions as target')
    .where('target.id', 'in', [...new Set(versionIds)])
    .select((eb) => [
      'target.id',
      eb
        .selectFrom('edge_worker_versions as v')
        .select('v.id')
        .whereRef('v.worker_id', '=', 'target.worker_id')
        .where((newer) => newer(newer.refTuple('v.created_at', 'v.id'), '>', newer.refTuple('target.created_at', 'target.id')))
        .where((newer) =>
          newer.exists(
            winningRows(newer.selectFrom('edge_worker_outbox as o'))
              .select(sql.lit(1).as('one'))
              .whereRef('o.version_id', '=', 'v.id')
              .whereRef('o.worker_id', '=', 'v.worker_id')
              // OFFSET 0 keeps PostgreSQL from turning the probe into a join over the Worker's rows
              // (SQLite runs it as a probe anyway, and has no OFFSET without LIMIT).
              .$if(ctx.env.backend === 'postgres', (probe) => probe.offset(0)),
          ),
        )
        .orderBy('v.created_at', 'desc')
        .orderBy('v.id', 'desc')
        .limit(1)
        .as('newer_version_id'),
    ])
    .execute()
  const newerOf = new Map(targets.flatMap((row) => (row.newer_version_id ? [[row.id, row.newer_version_id]] : [])))
  if (newerOf.size === 0) return new Map()
  const rows = await winningRows(ctx.db.selectFrom('edge_worker_outbox as o'))
    .select(['o.id', 'o.version_id'])
    .where('o.version_id', 'in', [...new Set(newerOf.values())])
    .orderBy('o.created_at')
    .orderBy('o.id')
    .execute()
  // The newest row of each version names it (later rows overwrite earlier ones). A version whose
  // rows stopped winning between the two statements no longer counts.
  const rowOf = new Map(rows.map((row) => [row.version_id!, row.id]))
  return new Map(
    [...newerOf].flatMap(([target, versionId]) => {
      const outboxId = rowOf.get(versionId)
      return outboxId ? [[target, {versionId, outboxId}] as const] : []
    }),
  )
}

/** Deploy rows that make older rows yield: queued, running, on the host, or may be (WINNING_STATUSES). */
function winningRows<Q extends SelectQueryBuilder<Database & {o: OutboxTable}, 'o', object>>(query: Q): Q {
  return query.where('o.operation', '=', 'deploy').where('o.status', 'in', WINNING_STATUSES) as Q
}

/** Why a deploy row yields: the message of its `deploy_superseded` settle, audit row and log line. */
export function supersededMessage(newerVersionId: string): string {
  return `version ${newerVersionId} of the Worker is newer; this deploy yields to it`
}
