// Service bindings (`"services"` in edgeworker.json) name departments; the host needs script names.
// One rule, applied when a version is submitted, when its deploy is enqueued and again when the task
// uploads it: the target is a live department of the same company whose Worker is deployed and not
// retired. The host then routes each call to the target's current release, so redeploying the
// target never breaks its callers.
import {KitError} from '../../errors.js'
import type {Engine} from '../context.js'
import type {WorkerManifest} from '../project/manifest.js'

export const SERVICE_BINDING_INVALID = 'service_binding_invalid'

/** Binding name → the target Worker's script name. Throws KitError('conflict', …, service_binding_invalid). */
export async function resolveServiceBindings(engine: Engine, companyId: string, manifest: WorkerManifest): Promise<Map<string, string>> {
  const resolved = new Map<string, string>()
  for (const service of manifest.services ?? []) {
    const refuse = (why: string): never => {
      throw new KitError('conflict', `service binding ${service.binding}: ${why}`, SERVICE_BINDING_INVALID)
    }
    const department = await engine.store.tenants.getDepartment(service.department)
    if (!department || department.deleted_at !== null) refuse(`department ${service.department} not found`)
    if (department!.company_id !== companyId) refuse(`department ${service.department} belongs to another company`)
    const worker = await engine.store.workers.getByDepartment(service.department)
    if (worker?.status === 'retired') refuse(`the Worker of department ${service.department} is retired`)
    if (!worker?.current_version_id) refuse(`department ${service.department} has no deployed Worker`)
    resolved.set(service.binding, worker!.script_name)
  }
  return resolved
}
