import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {gatesFields} from '../../cli/gates-render.js'
import {setMaintenance} from '../../engine/maintenance.js'

export default class MaintenanceOn extends BaseCommand<typeof MaintenanceOn> {
  static override description = `Turn the maintenance gate on: new deploys and uncertain-repairs are refused with 409 edge_workers_maintenance.

Deploys already queued keep running (a backup fence is what stops execution). Exit codes: 0 on;
2 no --reason; 6 the store is not paired.`
  static override examples = ['<%= config.bin %> maintenance on --reason "store upgrade"']
  static override enableJsonFlag = true
  static override flags = {
    reason: Flags.string({required: true, description: 'Why (shown in the 409 and in status)'}),
  }

  async run() {
    const status = await setMaintenance(await this.engine(), {on: true, reason: this.flags.reason, actor: this.operator})
    return this.respond(status, () => gatesFields(status))
  }
}
