import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {moveWorker} from '../../engine/hosts/move.js'

export default class WorkerMove extends BaseCommand<typeof WorkerMove> {
  static override description = `Move a stateful Edge Worker to another edge host of the kit.

A Worker with Durable Objects, KV, D1, R2 or queue data, or cron triggers, runs on one owner host.
The move fences it on the old owner (it answers 503 worker_moved from then on), copies its data to
the new host, deploys its current release there, switches the owner, and drops the old copy. Run it
again after a crash, or let the next reconcile pass finish it: it continues where it stopped.
Regenerate the load balancer's configuration afterwards (\`lb config --haproxy\`).
Exit codes: 0 moved, 5 no such Worker or host, 6 the Worker keeps no data (it runs on every host),
the host is its owner already, is draining, or another move is under way, 10 a host did not answer or refused.`
  static override examples = [
    '<%= config.bin %> worker move acme-sales --to onprem:0123456789ab',
    '<%= config.bin %> worker move acme-sales --to http://edge-02.internal:8788 --json',
  ]
  static override args = {worker: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'})}
  static override enableJsonFlag = true
  static override flags = {
    to: Flags.string({required: true, description: 'The new owner host: its scope (onprem:<12 hex>), those 12 hex, or its management URL'}),
  }

  async run() {
    const moved = await moveWorker(await this.engine(), this.args.worker, this.flags.to)
    return this.respond(moved, () => `moved ${moved.scriptName} from ${moved.from} to ${moved.to} (${moved.files} data file(s) copied)`)
  }
}
