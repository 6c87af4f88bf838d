// `edgeworkers triggers list`: each Worker's cron triggers as the edge host runs them — the last run
// and how it ended, the next run (UTC).
import type {CronTriggerStatus} from '../protocol/api/crons.js'
import type {Engine} from './context.js'
import {listEachWorker} from './worker-reads.js'

export type WorkerTrigger = {department: string; script: string} & CronTriggerStatus

export interface TriggerListing {
  triggers: WorkerTrigger[]
}

/** The cron triggers of the Worker `handle` names, or of every Worker that serves; `signal` bounds the host calls. */
export async function listTriggers(engine: Engine, handle?: string, signal?: AbortSignal): Promise<TriggerListing> {
  return {
    triggers: await listEachWorker(
      engine,
      handle,
      'cron triggers',
      async (provider, worker) => (await provider.cronTriggers(worker.script_name, signal)).triggers,
      signal,
    ),
  }
}
