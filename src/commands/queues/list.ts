import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {table} from '../../cli/table.js'
import {listQueues} from '../../engine/queues.js'
import {formatDuration} from '../../engine/status/snapshot.js'

export default class QueuesList extends BaseCommand<typeof QueuesList> {
  static override description = `List Workers' queues with their counts, as the edge host reads them now.

Without a department, every deployed Worker's queues. BACKLOG counts every stored message (in flight and delayed included); DEAD-LETTERED counts the messages the queue moved to its dead-letter queue (or dropped without one) since it was created. --json prints {queues: [{department, script, queue, producers, consumer, backlog, inFlight, delayed, deadLettered, oldestMessageAgeMs}]}.

Exit codes: 0 listed; 5 unknown department or never deployed; 6 retired Worker or no paired host; 10 host unreachable.`
  static override examples = ['<%= config.bin %> queues list', '<%= config.bin %> queues list acme-sales --json']
  static override args = {
    department: Args.string({description: 'Department id, Worker id or script name (dw-…); all Workers when left out'}),
  }
  static override enableJsonFlag = true

  async run() {
    const listing = await listQueues(await this.engine(), this.args.department)
    return this.respond(listing, () =>
      table(
        ['DEPARTMENT', 'QUEUE', 'BACKLOG', 'IN FLIGHT', 'DELAYED', 'DEAD-LETTERED', 'OLDEST'],
        listing.queues.map((queue) => [
          queue.department,
          queue.queue,
          String(queue.backlog),
          String(queue.inFlight),
          String(queue.delayed),
          String(queue.deadLettered),
          queue.oldestMessageAgeMs === null ? '-' : formatDuration(queue.oldestMessageAgeMs),
        ]),
        'no queues',
      ),
    )
  }
}
