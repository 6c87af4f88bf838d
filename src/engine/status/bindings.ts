// The queues and cron triggers `status` watches: a queue holding status.queue_backlog_threshold
// messages or more, and a cron trigger whose last run did not end `ok`, need attention. Read from
// the host per deployed Worker (`queues list`, `triggers list`); a host that does not answer leaves
// the panel out (the host panel already says so) instead of failing the snapshot.
import type {Engine} from '../context.js'
import {listQueues, type WorkerQueue} from '../queues.js'
import {listTriggers, type WorkerTrigger} from '../triggers.js'

export interface BindingsPanel {
  /** Queues at or over the threshold, biggest backlog first. */
  backlogged: WorkerQueue[]
  /** Cron triggers whose last finished run did not end `ok`. */
  failingCrons: WorkerTrigger[]
  threshold: number
}

/** `timeoutMs` (status.host_timeout_ms) bounds the host calls of one refresh. */
export async function bindingsPanel(engine: Engine, timeoutMs: number): Promise<BindingsPanel | null> {
  const threshold = engine.settings.status.queue_backlog_threshold
  const signal = AbortSignal.timeout(timeoutMs)
  try {
    const [{queues}, {triggers}] = await Promise.all([listQueues(engine, undefined, signal), listTriggers(engine, undefined, signal)])
    return {
      backlogged: queues.filter((queue) => queue.backlog >= threshold).sort((a, b) => b.backlog - a.backlog),
      failingCrons: triggers.filter((trigger) => trigger.lastOutcome !== null && trigger.lastOutcome !== 'ok'),
      threshold,
    }
  } catch {
    return null
  }
}

/** `queue acme-sales/jobs: 1200 messages waiting (threshold 1000)`, `cron acme-sales "0 * * * *": last run exception`. */
export function bindingReasons(panel: BindingsPanel | null): string[] {
  if (panel === null) return []
  return [
    ...panel.backlogged.map((queue) => `queue ${queue.department}/${queue.queue}: ${queue.backlog} messages waiting (threshold ${panel.threshold})`),
    ...panel.failingCrons.map((trigger) => `cron ${trigger.department} "${trigger.cron}": last run ${trigger.lastOutcome}`),
  ]
}
