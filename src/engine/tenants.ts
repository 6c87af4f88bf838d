// Companies and departments as operators create and purge them: each action's typed result is what
// the command prints (and returns under --json).
import {KitError} from '../errors.js'
import type {CompanyRow, DepartmentRow, PurgeCounts, ServiceAccountRow} from '../store/index.js'
import type {Engine} from './context.js'

export function createCompany(engine: Engine, input: {id?: string; name: string}): Promise<CompanyRow> {
  return engine.store.tenants.createCompany(input)
}

export interface CreatedDepartment {
  department: DepartmentRow
  service_accounts: ServiceAccountRow[]
}

/** The department with its service accounts, all or nothing. */
export function createDepartment(engine: Engine, input: {id?: string; companyId: string; name: string; serviceAccounts: string[]}): Promise<CreatedDepartment> {
  return engine.store.transaction(async (tx) => {
    const department = await tx.tenants.createDepartment({id: input.id, company_id: input.companyId, name: input.name})
    const serviceAccounts: ServiceAccountRow[] = []
    for (const name of input.serviceAccounts) serviceAccounts.push(await tx.tenants.createServiceAccount({department_id: department.id, name}))
    return {department, service_accounts: serviceAccounts}
  })
}

export interface PurgedCompany {
  company_id: string
  deleted: PurgeCounts
}

/** Hard-deletes the company with its departments, service accounts, Workers and versions; outbox and audit rows stay. */
export async function purgeCompany(engine: Engine, companyId: string): Promise<PurgedCompany> {
  const deleted = await engine.store.tenants.purgeCompany(companyId)
  if (!deleted) throw new KitError('not_found', `company ${companyId} not found`)
  return {company_id: companyId, deleted}
}
