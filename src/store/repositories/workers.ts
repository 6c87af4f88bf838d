// Edge Workers (one per department) and their immutable versions.
import {canonicalJson} from '../../canonical-json.js'
import {KitError} from '../../errors.js'
import type {StoreContext} from '../context.js'
import {newId, SCRIPT_NAME_PATTERN} from '../ids.js'
import {idsWithPrefix} from './id-prefix.js'
import {
  parseJsonObject,
  type EdgeWorkerVersionsTable,
  type JsonObject,
  type VersionRow,
  type VersionSplit,
  type VersionState,
  type WorkerRow,
} from '../schema.js'

export interface WorkerCreateInput {
  id?: string
  company_id: string
  department_id: string
  /** Stored as given: the name on the row wins over any later derivation. */
  script_name: string
  status: string
}

export interface VersionCreateInput {
  id?: string
  worker_id: string
  release_generation: string
  builder_policy: string
  state?: VersionState
  project_artifact_key: string
  project_digest: string
  bundle_artifact_key: string
  bundle_digest: string
  manifest: JsonObject
  receipt: JsonObject
  /** What `versions show` tells about it; all optional. */
  message?: string | null
  tag?: string | null
  author?: string | null
  source?: JsonObject | null
  size_bytes?: number | null
  rollback_of?: string | null
  split?: VersionSplit | null
  /**
   * The SHA-256s of the asset objects it serves (recorded in edge_worker_version_assets with the
   * version, for artifact cleanup), or `{sameAs}`: those of an existing version (a rollback's copy).
   */
  asset_digests?: readonly string[] | {sameAs: string}
}

export class WorkerRepository {
  constructor(private readonly ctx: StoreContext) {}

  async create(input: WorkerCreateInput): Promise<WorkerRow> {
    if (!SCRIPT_NAME_PATTERN.test(input.script_name)) {
      throw new KitError('usage', `script name ${JSON.stringify(input.script_name)} is invalid: it must match ${SCRIPT_NAME_PATTERN.source}`)
    }
    return this.ctx.atomic(async (tx) => {
      const department = await tx.db.selectFrom('departments').select(['company_id', 'deleted_at']).where('id', '=', input.department_id).executeTakeFirst()
      if (!department || department.deleted_at !== null || department.company_id !== input.company_id) {
        throw new KitError('not_found', `department ${input.department_id} of company ${input.company_id} not found`)
      }
      const now = this.ctx.now()
      const row: WorkerRow = {
        id: input.id ?? newId(),
        company_id: input.company_id,
        department_id: input.department_id,
        script_name: input.script_name,
        status: input.status,
        current_version_id: null,
        serving_scope: null,
        base_revision: 0,
        created_at: now,
        updated_at: now,
        retired_at: null,
      }
      // id, department (one Worker each) and script name (never reused) are all unique.
      if (!(await tx.insertNew('edge_workers', row))) {
        throw new KitError('conflict', `a Worker already exists for department ${input.department_id} or script ${input.script_name}`)
      }
      return row
    })
  }

  async get(id: string): Promise<WorkerRow | undefined> {
    return this.ctx.db.selectFrom('edge_workers').selectAll().where('id', '=', id).executeTakeFirst()
  }

  /** Up to `limit` Worker ids starting with `prefix`, in id order: what a short id may mean. */
  idsWithPrefix(prefix: string, limit: number): Promise<string[]> {
    return idsWithPrefix(this.ctx.db, 'edge_workers', prefix, limit)
  }

  async getByScriptName(scriptName: string): Promise<WorkerRow | undefined> {
    return this.ctx.db.selectFrom('edge_workers').selectAll().where('script_name', '=', scriptName).executeTakeFirst()
  }

  /** A department's Worker (one per department). */
  async getByDepartment(departmentId: string): Promise<WorkerRow | undefined> {
    return this.ctx.db
      .selectFrom('edge_workers')
      .selectAll()
      .where('department_id', '=', departmentId)
      .orderBy('created_at', 'desc')
      .limit(1)
      .executeTakeFirst()
  }

  async list(filter: {companyId?: string; status?: string} = {}): Promise<WorkerRow[]> {
    return this.ctx.db
      .selectFrom('edge_workers')
      .selectAll()
      .$if(filter.companyId !== undefined, (q) => q.where('company_id', '=', filter.companyId!))
      .$if(filter.status !== undefined, (q) => q.where('status', '=', filter.status!))
      .orderBy('created_at')
      .orderBy('id')
      .execute()
  }

  /** Workers serving a deployed version (not retired), of `scope` when given, by department; at most `limit`, with how many there are. */
  /** Live Workers, each with its current version's split (a gradual deployment; null: the version alone). */
  async live(scope: string | null, limit: number): Promise<{total: number; workers: Array<WorkerRow & {split: VersionSplit | null}>}> {
    const query = this.ctx.db
      .selectFrom('edge_workers as w')
      .where('w.retired_at', 'is', null)
      .where('w.current_version_id', 'is not', null)
      .$if(scope !== null, (q) => q.where('w.serving_scope', '=', scope!))
    const [workers, counted] = await Promise.all([
      query
        .leftJoin('edge_worker_versions as v', 'v.id', 'w.current_version_id')
        .selectAll('w')
        .select('v.split')
        .orderBy('w.department_id')
        .orderBy('w.id')
        .limit(limit)
        .execute(),
      query.select((eb) => eb.fn.countAll<number | string | bigint>().as('count')).executeTakeFirstOrThrow(),
    ])
    return {total: Number(counted.count), workers: workers.map((row) => ({...row, split: row.split ? (JSON.parse(row.split) as VersionSplit) : null}))}
  }

  /** false when the Worker no longer exists. */
  async setStatus(id: string, status: string): Promise<boolean> {
    return this.ctx.write(async ({db}) => {
      const result = await db.updateTable('edge_workers').set({status, updated_at: this.ctx.now()}).where('id', '=', id).executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /**
   * Inserts a version. Its created_at is the Worker's deploy order (see newerDeployOf in
   * ./deployments.ts): strictly after every earlier version of the Worker, whatever the clocks of the
   * machines that commit them say — taken under the Worker row's lock, so two commits of one Worker
   * are ordered too.
   */
  async createVersion({asset_digests: assetDigests = [], ...input}: VersionCreateInput): Promise<VersionRow> {
    return this.ctx.atomic(async (tx) => {
      const {db} = tx
      await tx.lockRow('edge_workers', input.worker_id)
      const latest = await db
        .selectFrom('edge_worker_versions')
        .select((eb) => eb.fn.max('created_at').as('created_at'))
        .where('worker_id', '=', input.worker_id)
        .executeTakeFirst()
      const now = Math.max(this.ctx.now(), Number(latest?.created_at ?? 0) + 1)
      const row = await db
        .insertInto('edge_worker_versions')
        .values({
          ...input,
          id: input.id ?? newId(),
          state: input.state ?? 'built',
          manifest: canonicalJson(input.manifest),
          receipt: canonicalJson(input.receipt),
          source: input.source ? canonicalJson(input.source) : null,
          split: input.split ? JSON.stringify(input.split) : null,
          created_at: now,
          updated_at: now,
        })
        .returningAll()
        .executeTakeFirstOrThrow()
      await recordVersionAssets(tx, row.id, assetDigests)
      return toVersionRow(row)
    })
  }

  async getVersion(id: string): Promise<VersionRow | undefined> {
    const row = await this.ctx.db.selectFrom('edge_worker_versions').selectAll().where('id', '=', id).executeTakeFirst()
    return row && toVersionRow(row)
  }

  async listVersions(workerId: string): Promise<VersionRow[]> {
    const rows = await this.ctx.db
      .selectFrom('edge_worker_versions')
      .selectAll()
      .where('worker_id', '=', workerId)
      .orderBy('created_at')
      .orderBy('id')
      .execute()
    return rows.map(toVersionRow)
  }

  /** false when the version no longer exists. */
  async setVersionState(id: string, state: VersionState): Promise<boolean> {
    return this.ctx.write(async ({db}) => {
      const result = await db.updateTable('edge_worker_versions').set({state, updated_at: this.ctx.now()}).where('id', '=', id).executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }
}

export function toVersionRow(row: EdgeWorkerVersionsTable): VersionRow {
  return {
    ...row,
    manifest: parseJsonObject(row.manifest),
    receipt: parseJsonObject(row.receipt),
    source: row.source === null ? null : parseJsonObject(row.source),
    split: row.split === null ? null : (JSON.parse(row.split) as VersionSplit),
  }
}

/**
 * Gives a version the outcome of a deploy that did not complete. Only a version still on its way
 * (`built`, `deploying`) takes it: a failure never downgrades a deployed or superseded version.
 */
export async function settleUnfinishedVersion(tx: StoreContext, versionId: string, state: 'failed' | 'uncertain', now: number): Promise<void> {
  await tx.db
    .updateTable('edge_worker_versions')
    .set({state, updated_at: now})
    .where('id', '=', versionId)
    .where('state', 'in', ['built', 'deploying'])
    .execute()
}

/** Rows per INSERT of asset digests: bounded statement parameters whatever the site's size. */
const ASSET_ROWS_PER_INSERT = 500

async function recordVersionAssets(tx: StoreContext, versionId: string, digests: readonly string[] | {sameAs: string}): Promise<void> {
  if ('sameAs' in digests) {
    const {sameAs} = digests
    await tx.db
      .insertInto('edge_worker_version_assets')
      .columns(['version_id', 'asset_digest'])
      .expression((eb) =>
        eb
          .selectFrom('edge_worker_version_assets')
          .select([eb.val(versionId).as('version_id'), 'asset_digest'])
          .where('version_id', '=', sameAs),
      )
      .execute()
    return
  }
  const unique = [...new Set(digests)]
  for (let start = 0; start < unique.length; start += ASSET_ROWS_PER_INSERT) {
    const slice = unique.slice(start, start + ASSET_ROWS_PER_INSERT)
    await tx.db
      .insertInto('edge_worker_version_assets')
      .values(slice.map((digest) => ({version_id: versionId, asset_digest: digest})))
      .execute()
  }
}
