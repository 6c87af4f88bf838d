// `edgeworkers retire <department>` as one engine call. Input is checked before anything is written;
// then, in one transaction, the department and its service accounts are soft-deleted (one audit row
// per account) and its Worker is marked `retiring`; then the Worker is retired on the host
// (./host-retirement.ts). A host that cannot be reached or told leaves the retirement pending for the
// host reconcile lane — the delete itself always stands. Retiring again is a no-op.
import {KitError} from '../../errors.js'
import {EDGE_HOST_FENCED} from '../../protocol/management-api.js'
import {SYSTEM_ACTOR, type AuditActor, type DepartmentRow, type WorkerRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {executionGate} from '../gates.js'
import {serviceAccountDeletedEntry} from './audit.js'
import {deployedPolicy, retirementSteps, retireWorkerOnHost, type RetirementStep} from './host-retirement.js'

export interface RetireRequest {
  departmentId: string
  /** When given, the department must belong to this company. */
  companyId?: string
  /** Report the plan; write nothing, call nothing. */
  dryRun?: boolean
  actor?: AuditActor
}

/**
 * `planned`: the dry run's answer. `retired`: the host retired the Worker now. `already_retired`:
 * nothing left to do. `pending`: deleted, but the host step failed; a pass retries it.
 * `no_worker`: deleted; the department had no Worker.
 */
export type RetireState = 'planned' | 'retired' | 'already_retired' | 'pending' | 'no_worker'

export interface RetireOutcome {
  state: RetireState
  departmentId: string
  companyId: string
  /** Service accounts soft-deleted by this call (or that would be, on a dry run). */
  serviceAccounts: string[]
  workerId: string | null
  scriptName: string | null
  /** Host steps in order (done, or planned on a dry run). */
  steps: RetirementStep[]
  code: string | null
  message: string | null
}

export type RetireProgress = 'delete' | RetirementStep

/**
 * What `retire` would do, without writing or calling anything: `planned`, or `already_retired`.
 * Throws on bad input (unknown department or company, a department of another company, a deleted
 * department without a Worker) — callers check this before showing any progress.
 */
export async function planRetirement(engine: Engine, request: RetireRequest): Promise<RetireOutcome> {
  return (await inspect(engine, request)).plan
}

export async function retireDepartment(engine: Engine, request: RetireRequest, onProgress: (step: RetireProgress) => void = () => {}): Promise<RetireOutcome> {
  const {store} = engine
  const {department, worker, plan} = await inspect(engine, request)
  if (plan.state === 'already_retired' || request.dryRun) return plan
  const base = {departmentId: plan.departmentId, companyId: plan.companyId, workerId: plan.workerId, scriptName: plan.scriptName}

  let serviceAccounts: string[] = []
  let retiring: WorkerRow | undefined = worker
  if (department.deleted_at === null) {
    onProgress('delete')
    const deletion = await store.transaction(async (tx) => {
      const deleted = await tx.retirements.softDeleteDepartment(department.id)
      if (!deleted) throw new KitError('conflict', `department ${department.id} was deleted meanwhile; run retire again`)
      for (const account of deleted.serviceAccounts) await tx.audit.append(serviceAccountDeletedEntry(account, request.actor ?? SYSTEM_ACTOR))
      return deleted
    })
    serviceAccounts = deletion.serviceAccounts.map((account) => account.id)
    retiring = deletion.worker
  }
  if (!retiring) return {...base, state: 'no_worker', serviceAccounts, steps: [], code: null, message: 'the department had no Worker'}

  const pending = (code: string, message: string): RetireOutcome => ({
    ...base,
    state: 'pending',
    serviceAccounts,
    steps: [],
    code,
    message: `${message}; a reconcile pass retries the retirement`,
  })
  const resolution = await engine.resolveProvider()
  if (resolution.status !== 'ready') return pending(resolution.code, resolution.message)
  const gate = await executionGate(engine, resolution)
  if (gate.closed) return pending(EDGE_HOST_FENCED, gate.message)

  const result = await retireWorkerOnHost(engine, {provider: resolution.provider, scope: resolution.scope}, retiring, onProgress)
  if (result.outcome === 'pending') return {...pending(result.code, result.message), steps: result.steps}
  return {...base, state: 'retired', serviceAccounts, steps: result.steps, code: null, message: null}
}

async function inspect(engine: Engine, request: RetireRequest): Promise<{department: DepartmentRow; worker: WorkerRow | undefined; plan: RetireOutcome}> {
  const {store} = engine
  const department = await checkedDepartment(engine, request)
  const worker = await store.workers.getByDepartment(department.id)
  const base = {departmentId: department.id, companyId: department.company_id, workerId: worker?.id ?? null, scriptName: worker?.script_name ?? null}
  if (department.deleted_at !== null) {
    if (!worker) throw new KitError('not_found', `department ${department.id} is already deleted (it had no Worker to retire)`)
    if (worker.retired_at !== null)
      return {department, worker, plan: {...base, state: 'already_retired', serviceAccounts: [], steps: [], code: null, message: 'already retired'}}
  }
  const live = department.deleted_at === null ? (await store.tenants.listServiceAccounts(department.id)).filter((account) => account.deleted_at === null) : []
  const steps = worker ? retirementSteps(await deployedPolicy(engine, worker)) : []
  return {department, worker, plan: {...base, state: 'planned', serviceAccounts: live.map((account) => account.id), steps, code: null, message: null}}
}

/** The department the request names, or a not-found error that writes nothing. */
async function checkedDepartment(engine: Engine, request: RetireRequest): Promise<DepartmentRow> {
  const {tenants} = engine.store
  if (request.companyId !== undefined && !(await tenants.getCompany(request.companyId))) {
    throw new KitError('not_found', `company ${request.companyId} not found`)
  }
  const department = await tenants.getDepartment(request.departmentId)
  // A department of another company is reported exactly like one that does not exist.
  if (!department || (request.companyId !== undefined && department.company_id !== request.companyId)) {
    throw new KitError(
      'not_found',
      request.companyId === undefined
        ? `department ${request.departmentId} not found`
        : `department ${request.departmentId} not found in company ${request.companyId}`,
    )
  }
  return department
}
