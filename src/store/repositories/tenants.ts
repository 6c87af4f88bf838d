// Companies, departments and service accounts. Departments and service accounts are soft-deleted
// (`deleted_at`); a company is hard-deleted (purge), which cascades to its departments, service
// accounts, Workers and versions while outbox and audit rows stay.
import {sql} from 'kysely'
import {KitError} from '../../errors.js'
import type {StoreContext} from '../context.js'
import {newId, TENANT_ID_PATTERN} from '../ids.js'
import type {CompanyRow, DepartmentRow, ServiceAccountRow} from '../schema.js'

export interface PurgeCounts {
  departments: number
  service_accounts: number
  workers: number
  versions: number
}

export class TenantRepository {
  constructor(private readonly ctx: StoreContext) {}

  async createCompany(input: {id?: string; name: string}): Promise<CompanyRow> {
    const id = checkedId(input.id, 'company')
    const now = this.ctx.now()
    const row: CompanyRow = {id, name: checkedName(input.name, 'company'), created_at: now, updated_at: now}
    return this.ctx.write(async (tx) => {
      if (!(await tx.insertNew('companies', row))) throw new KitError('conflict', `company ${id} already exists`)
      return row
    })
  }

  async getCompany(id: string): Promise<CompanyRow | undefined> {
    return this.ctx.db.selectFrom('companies').selectAll().where('id', '=', id).executeTakeFirst()
  }

  /** Hard-deletes a company and everything that cascades from it; undefined when it does not exist. */
  async purgeCompany(id: string): Promise<PurgeCounts | undefined> {
    return this.ctx.atomic(async (tx) => {
      const {db} = tx
      const company = await tx.lockRow('companies', id)
      if (!company) return undefined
      const {rows} = await sql<PurgeCounts>`
        select
          (select count(*) from departments where company_id = ${id}) as departments,
          (select count(*) from service_accounts
            where department_id in (select id from departments where company_id = ${id})) as service_accounts,
          (select count(*) from edge_workers where company_id = ${id}) as workers,
          (select count(*) from edge_worker_versions
            where worker_id in (select id from edge_workers where company_id = ${id})) as versions`.execute(db)
      await db.deleteFrom('companies').where('id', '=', id).execute()
      return rows[0]!
    })
  }

  async createDepartment(input: {id?: string; company_id: string; name: string}): Promise<DepartmentRow> {
    const id = checkedId(input.id, 'department')
    const name = checkedName(input.name, 'department')
    return this.ctx.atomic(async (tx) => {
      const company = await tx.db.selectFrom('companies').select('id').where('id', '=', input.company_id).executeTakeFirst()
      if (!company) throw new KitError('not_found', `company ${input.company_id} not found`)
      const now = this.ctx.now()
      const row: DepartmentRow = {id, company_id: input.company_id, name, created_at: now, updated_at: now, deleted_at: null}
      if (!(await tx.insertNew('departments', row))) throw new KitError('conflict', `department ${id} already exists`)
      return row
    })
  }

  async getDepartment(id: string): Promise<DepartmentRow | undefined> {
    return this.ctx.db.selectFrom('departments').selectAll().where('id', '=', id).executeTakeFirst()
  }

  async createServiceAccount(input: {id?: string; department_id: string; name: string}): Promise<ServiceAccountRow> {
    const id = checkedId(input.id, 'service account')
    const name = checkedName(input.name, 'service account')
    return this.ctx.atomic(async (tx) => {
      const department = await tx.db.selectFrom('departments').select('deleted_at').where('id', '=', input.department_id).executeTakeFirst()
      if (!department || department.deleted_at !== null) throw new KitError('not_found', `department ${input.department_id} not found`)
      const now = this.ctx.now()
      const row: ServiceAccountRow = {id, department_id: input.department_id, name, created_at: now, updated_at: now, deleted_at: null}
      // Both the id and the live (department, name) pair are unique.
      if (!(await tx.insertNew('service_accounts', row)))
        throw new KitError('conflict', `service account ${name} already exists in department ${input.department_id}`)
      return row
    })
  }

  async listServiceAccounts(departmentId: string): Promise<ServiceAccountRow[]> {
    return this.ctx.db.selectFrom('service_accounts').selectAll().where('department_id', '=', departmentId).orderBy('name').execute()
  }
}

function checkedId(id: string | undefined, what: string): string {
  if (id === undefined) return newId()
  if (!TENANT_ID_PATTERN.test(id)) {
    throw new KitError('usage', `${what} id ${JSON.stringify(id)} is invalid: use 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit`)
  }
  return id
}

function checkedName(name: string, what: string): string {
  const trimmed = name.trim()
  if (trimmed.length === 0 || trimmed.length > 200) throw new KitError('usage', `${what} name must be 1–200 characters`)
  // Names are echoed to terminals and logs: an escape sequence or a newline in one could rewrite
  // what an operator reads. Control characters (C0, DEL, C1) and bidirectional overrides are refused.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
  const offending = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/.exec(trimmed)
  if (offending) {
    const code = `U+${offending[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`
    throw new KitError('usage', `${what} name must not contain control characters (${code} at position ${offending.index + 1})`)
  }
  return trimmed
}
