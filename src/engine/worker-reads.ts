// Reads of what the edge host keeps for Workers (`queues list`, `triggers list`): for the Worker a
// handle names, or for every Worker that serves when none is named, the host's refusals as KitErrors.
import {KitError} from '../errors.js'
import {ProviderError, type EdgeProvider} from '../provider/types.js'
import type {WorkerRow} from '../store/index.js'
import type {Engine} from './context.js'
import {requireProvider} from './provider.js'
import {findWorker, listWorkers} from './workers.js'

/** `read` for each Worker in question, with its department: the named one, or every deployed Worker that is not retired. */
async function readEachWorker<T>(
  engine: Engine,
  handle: string | undefined,
  what: string,
  read: (provider: EdgeProvider, worker: WorkerRow, signal?: AbortSignal) => Promise<T>,
  signal?: AbortSignal,
): Promise<Array<{worker: WorkerRow; result: T}>> {
  const workers = handle === undefined ? (await listWorkers(engine, {})).filter(serves) : [await namedWorker(engine, handle, what)]
  if (workers.length === 0) return []
  const {provider} = await requireProvider(engine, `read the ${what} of ${handle ?? 'the Workers'}`)
  const results: Array<{worker: WorkerRow; result: T}> = []
  for (const worker of workers) {
    try {
      results.push({worker, result: await read(provider, worker, signal)})
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error
      throw workerReadError(error, handle ?? worker.department_id)
    }
  }
  return results
}

/** What `read` lists for each Worker in question (see readEachWorker), each item labelled with its Worker's department and script. */
export async function listEachWorker<T>(
  engine: Engine,
  handle: string | undefined,
  what: string,
  read: (provider: EdgeProvider, worker: WorkerRow, signal?: AbortSignal) => Promise<T[]>,
  signal?: AbortSignal,
): Promise<Array<{department: string; script: string} & T>> {
  const reads = await readEachWorker(engine, handle, what, read, signal)
  return reads.flatMap(({worker, result}) => result.map((item) => ({department: worker.department_id, script: worker.script_name, ...item})))
}

function serves(worker: WorkerRow): boolean {
  return worker.current_version_id !== null && worker.retired_at === null
}

async function namedWorker(engine: Engine, handle: string, what: string): Promise<WorkerRow> {
  const worker = await findWorker(engine, handle)
  if (worker.retired_at !== null) throw new KitError('conflict', `Worker ${handle} is retired: nothing serves its ${what}`)
  if (worker.current_version_id === null) throw new KitError('not_found', `Worker ${handle} is not on the edge host: it was never deployed`)
  return worker
}

/** A host's refusal of a read of the Worker `handle` names, as the kit reports it. */
export function workerReadError(error: ProviderError, handle: string): KitError {
  switch (error.code) {
    case 'edge_host_script_not_found':
      return new KitError('not_found', `Worker ${handle} is not on the edge host: it was never deployed`, error.code)
    case 'edge_host_unreachable':
      return new KitError('host_unreachable', error.message, error.code)
    default:
      return new KitError('host_error', error.message, error.code)
  }
}
