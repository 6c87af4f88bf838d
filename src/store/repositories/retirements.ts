// Retirement of departments' Workers and of orphan scripts (a company hard delete). A retirement is
// pending while the department is soft-deleted and its Worker row has no `retired_at`; an orphan is
// pending while deploy outbox rows of a scope name a Worker whose rows are gone and no
// `department.worker_script_neutralized` row confirms it for that scope. Both facts are durable, so
// any later pass of any runner can finish the work.
import {sql} from 'kysely'
import type {StoreContext} from '../context.js'
import type {DepartmentRow, ServiceAccountRow, WorkerRow} from '../schema.js'

/** The audit action that confirms an orphan's script was retired in a scope (reason_code = scope). */
export const ORPHAN_CONFIRMATION_ACTION = 'department.worker_script_neutralized'

export interface DepartmentDeletion {
  department: DepartmentRow
  /** The accounts this delete soft-deleted (live ones only). */
  serviceAccounts: ServiceAccountRow[]
  /** The department's Worker, now `retiring`; undefined when it has none. */
  worker: WorkerRow | undefined
}

export interface OrphanCandidate {
  worker_id: string
  company_id: string | null
  department_id: string | null
  /** The name a deploy row stored; null when none recorded one (the caller derives it). */
  script_name: string | null
  /** A deploy row is still pending or leased, or ended within the upload grace. */
  unsettled: boolean
}

export class RetirementRepository {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Soft-deletes a live department and its live service accounts and marks its Worker `retiring`,
   * atomically. undefined when the department is missing or already deleted (a concurrent delete).
   */
  async softDeleteDepartment(departmentId: string): Promise<DepartmentDeletion | undefined> {
    return this.ctx.atomic(async ({db}) => {
      const department = await db
        .selectFrom('departments')
        .selectAll()
        .where('id', '=', departmentId)
        .where('deleted_at', 'is', null)
        .$if(this.ctx.locksRows, (q) => q.forUpdate())
        .executeTakeFirst()
      if (!department) return undefined
      const now = this.ctx.now()
      await db.updateTable('departments').set({deleted_at: now, updated_at: now}).where('id', '=', departmentId).execute()
      const serviceAccounts = await db
        .updateTable('service_accounts')
        .set({deleted_at: now, updated_at: now})
        .where('department_id', '=', departmentId)
        .where('deleted_at', 'is', null)
        .returningAll()
        .execute()
      const worker = await db
        .updateTable('edge_workers')
        .set({status: 'retiring', updated_at: now})
        .where('department_id', '=', departmentId)
        .where('retired_at', 'is', null)
        .returningAll()
        .executeTakeFirst()
      return {department: {...department, deleted_at: now, updated_at: now}, serviceAccounts: serviceAccounts.sort((a, b) => a.id.localeCompare(b.id)), worker}
    })
  }

  /** Workers of soft-deleted departments not yet retired, that this scope's host serves (or may). */
  async pendingRetirements(scope: string): Promise<WorkerRow[]> {
    return this.ctx.db
      .selectFrom('edge_workers as w')
      .innerJoin('departments as d', 'd.id', 'w.department_id')
      .selectAll('w')
      .where('d.deleted_at', 'is not', null)
      .where('w.retired_at', 'is', null)
      .where((eb) => eb.or([eb('w.serving_scope', 'is', null), eb('w.serving_scope', '=', scope)]))
      .orderBy('w.updated_at')
      .orderBy('w.id')
      .execute()
  }

  /** Records that the host retired the Worker's script; false when it was already recorded or is gone. */
  async markRetired(workerId: string): Promise<boolean> {
    return this.ctx.write(async ({db}) => {
      const now = this.ctx.now()
      const result = await db
        .updateTable('edge_workers')
        .set({status: 'retired', retired_at: now, updated_at: now})
        .where('id', '=', workerId)
        .where('retired_at', 'is', null)
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /**
   * The scope's pending orphans: Workers this scope deployed whose Worker and department rows are
   * gone and that no `department.worker_script_neutralized` row confirms retired here. Found without
   * reading every deploy row: Workers and departments disappear only with their company (company
   * purge cascades), so only companies that no longer exist — or whose id a company created after the
   * rows took again — can own orphans. A loose index scan finds the scope's companies (one seek
   * each); only the candidates' deploy rows are then read, from the index. Deploy rows always carry
   * their company, department and the Worker's one script name.
   */
  async pendingOrphans(scope: string, graceCutoff: number): Promise<OrphanCandidate[]> {
    const {rows: candidates} = await sql<{company_id: string}>`
      with recursive seen(company_id) as (
        select min(company_id) from edge_worker_outbox where dispatch_namespace = ${scope} and operation = 'deploy'
        union all
        select (
          select min(o.company_id) from edge_worker_outbox o
          where o.dispatch_namespace = ${scope} and o.operation = 'deploy' and o.company_id > seen.company_id
        ) from seen where seen.company_id is not null
      )
      select seen.company_id from seen
      where seen.company_id is not null and not exists (
        select 1 from companies c
        where c.id = seen.company_id and c.created_at <= (
          select min(o.created_at) from edge_worker_outbox o
          where o.dispatch_namespace = ${scope} and o.operation = 'deploy' and o.company_id = seen.company_id))`.execute(this.ctx.db)
    if (candidates.length === 0) return []
    const companies = candidates.map((candidate) => candidate.company_id)
    const {rows} = await sql<{
      worker_id: string
      company_id: string | null
      department_id: string | null
      script_name: string | null
      unsettled: number | string
    }>`
      select g.worker_id, g.company_id, g.department_id, g.unsettled,
        (select s.script_name from edge_worker_outbox s where s.worker_id = g.worker_id and s.script_name is not null limit 1) as script_name
      from (
        select o.worker_id, max(o.company_id) as company_id, max(o.department_id) as department_id,
          max(case when o.status in ('pending', 'deferred', 'leased') or o.updated_at >= ${graceCutoff} then 1 else 0 end) as unsettled
        from edge_worker_outbox o
        where o.dispatch_namespace = ${scope} and o.operation = 'deploy' and o.company_id in (${sql.join(companies)}) and o.worker_id is not null
        group by o.worker_id
      ) g
      where not exists (select 1 from edge_workers w where w.id = g.worker_id)
        and not exists (select 1 from departments d where d.id = g.department_id)
        and not exists (
          select 1 from edge_worker_audit_logs a
          where a.resource_type = 'edge_worker' and a.resource_id = g.worker_id
            and a.action = ${ORPHAN_CONFIRMATION_ACTION} and a.reason_code = ${scope})
      order by g.worker_id`.execute(this.ctx.db)
    return rows.map((row) => ({...row, unsettled: Number(row.unsettled) === 1}))
  }

  /** Which of these script names a Worker row stores (any company, retired or not). */
  async storedScriptNames(names: readonly string[]): Promise<Set<string>> {
    const stored = new Set<string>()
    // Chunked: SQLite caps bound parameters.
    for (let start = 0; start < names.length; start += 500) {
      const rows = await this.ctx.db
        .selectFrom('edge_workers')
        .select('script_name')
        .where('script_name', 'in', names.slice(start, start + 500))
        .execute()
      for (const row of rows) stored.add(row.script_name)
    }
    return stored
  }

  /** Every Worker row's naming inputs, for the orphan report. */
  async workerNames(): Promise<Array<Pick<WorkerRow, 'company_id' | 'department_id' | 'script_name'>>> {
    return this.ctx.db.selectFrom('edge_workers').select(['company_id', 'department_id', 'script_name']).execute()
  }
}
