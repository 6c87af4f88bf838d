// `edgeworkers queues list|show`: each Worker's queues with their counts as the edge host reads them
// now (backlog, in flight, delayed, dead-lettered, oldest message age) and their consumer settings.
import {KitError} from '../errors.js'
import type {QueueStatus} from '../protocol/api/queues.js'
import type {Engine} from './context.js'
import {listEachWorker} from './worker-reads.js'

export type WorkerQueue = {department: string; script: string} & QueueStatus

export interface QueueListing {
  queues: WorkerQueue[]
}

/** The queues of the Worker `handle` names, or of every Worker that serves; `signal` bounds the host calls. */
export async function listQueues(engine: Engine, handle?: string, signal?: AbortSignal): Promise<QueueListing> {
  return {
    queues: await listEachWorker(engine, handle, 'queues', async (provider, worker) => (await provider.queues(worker.script_name, signal)).queues, signal),
  }
}

export async function showQueue(engine: Engine, handle: string, queue: string): Promise<WorkerQueue> {
  const {queues} = await listQueues(engine, handle)
  const found = queues.find((candidate) => candidate.queue === queue)
  if (!found) {
    const known = queues.length === 0 ? 'it has none' : `its queues: ${queues.map((candidate) => candidate.queue).join(', ')}`
    throw new KitError('not_found', `Worker ${handle} has no queue ${JSON.stringify(queue)} (${known})`)
  }
  return found
}
