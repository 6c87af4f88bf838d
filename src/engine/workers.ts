// Reading Workers the way operators name them: by department id (the usual handle), Worker id or
// script name; and where a Worker answers.
import {KitError} from '../errors.js'
import {SCRIPT_NAME_PATTERN, type VersionRow, type WorkerRow} from '../store/index.js'
import type {Engine} from './context.js'
import {resolveIdPrefixOrNull} from './id-prefix.js'

/** Workers, oldest first, of one company and/or in one status when given. */
export function listWorkers(engine: Engine, filter: {companyId?: string; status?: string}): Promise<WorkerRow[]> {
  return engine.store.workers.list(filter)
}

/** The Worker a handle names: a script name (dw-…), a Worker id or a unique prefix of one, or the id of its department. */
export async function findWorker(engine: Engine, handle: string): Promise<WorkerRow> {
  const {workers} = engine.store
  const worker = SCRIPT_NAME_PATTERN.test(handle)
    ? await workers.getByScriptName(handle)
    : ((await workers.get(handle)) ?? (await workers.getByDepartment(handle)) ?? (await workerByIdPrefix(engine, handle)))
  if (!worker) throw new KitError('not_found', `Worker ${handle} not found (give a department id, a Worker id or a unique prefix of one, or a script name)`)
  return worker
}

/** The Worker a unique prefix of its id names; undefined when none does (an ambiguous prefix throws). */
async function workerByIdPrefix(engine: Engine, typed: string): Promise<WorkerRow | undefined> {
  const id = await resolveIdPrefixOrNull('Worker', typed, (prefix, limit) => engine.store.workers.idsWithPrefix(prefix, limit))
  return id === null ? undefined : engine.store.workers.get(id)
}

export interface WorkerDetails {
  worker: WorkerRow
  versions: VersionRow[]
  /** Where the Worker answers while it serves; null when retired, never deployed, or the host cannot say. */
  url: string | null
}

export async function showWorker(engine: Engine, handle: string): Promise<WorkerDetails> {
  const worker = await findWorker(engine, handle)
  const [versions, url] = await Promise.all([
    engine.store.workers.listVersions(worker.id),
    worker.current_version_id && worker.retired_at === null ? workerUrl(engine, worker.script_name) : Promise.resolve(null),
  ])
  return {worker, versions, url}
}

/** `<public url>/<script>/` as the paired host describes itself; null when no host answers. */
export async function workerUrl(engine: Engine, scriptName: string): Promise<string | null> {
  const resolution = await engine.resolveProvider()
  if (resolution.status !== 'ready') return null
  const host = await resolution.provider.describeHost().catch(() => null)
  return host ? `${host.publicUrl.replace(/\/$/, '')}/${scriptName}/` : null
}
