import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {showQueue} from '../../engine/queues.js'
import {formatDuration} from '../../engine/status/snapshot.js'

export default class QueuesShow extends BaseCommand<typeof QueuesShow> {
  static override description = `Show one of a Worker's queues: its counts as the edge host reads them now, and its consumer's settings.

--json prints {department, script, queue, producers, consumer, backlog, inFlight, delayed, deadLettered, oldestMessageAgeMs}; consumer is null for a dead-letter queue nothing consumes.

Exit codes: 0 shown; 5 unknown department, never deployed, or no such queue; 6 retired Worker or no paired host; 10 host unreachable.`
  // wrangler's name for the same view.
  static override aliases = ['queues:info']
  static override examples = ['<%= config.bin %> queues show acme-sales orders', '<%= config.bin %> queues show acme-sales orders --json']
  static override args = {
    department: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'}),
    queue: Args.string({required: true, description: "The queue's name (as in the Worker's queues config)"}),
  }
  static override enableJsonFlag = true

  async run() {
    const queue = await showQueue(await this.engine(), this.args.department, this.args.queue)
    return this.respond(queue, () => {
      const {consumer} = queue
      const lines = [
        `queue          ${queue.queue} (${queue.department}, ${queue.script})`,
        `producers      ${queue.producers.length === 0 ? '-' : queue.producers.join(', ')}`,
        `backlog        ${queue.backlog} (${queue.inFlight} in flight, ${queue.delayed} delayed)`,
        `dead-lettered  ${queue.deadLettered}`,
        `oldest         ${queue.oldestMessageAgeMs === null ? '-' : formatDuration(queue.oldestMessageAgeMs)}`,
      ]
      if (consumer === null) lines.push('consumer       none')
      else
        lines.push(
          `consumer       max_batch_size ${consumer.maxBatchSize}, max_batch_timeout ${consumer.maxBatchTimeout}s, max_retries ${consumer.maxRetries}, retry_delay ${consumer.retryDelay}s, max_concurrency ${consumer.maxConcurrency}`,
          `dead letters   ${consumer.deadLetterQueue ?? '-'}`,
        )
      return lines.join('\n')
    })
  }
}
