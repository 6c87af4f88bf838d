import {BaseCommand} from '../../cli/base-command.js'
import {gatesFields} from '../../cli/gates-render.js'
import {gatesStatus} from '../../engine/maintenance.js'

export default class MaintenanceStatus extends BaseCommand<typeof MaintenanceStatus> {
  static override description = 'Show the maintenance and restore-pending gates and the open backup fence. Exit code 0; 6 when unpaired.'
  static override examples = ['<%= config.bin %> maintenance status', '<%= config.bin %> maintenance status --json']
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const status = await gatesStatus(await this.engine())
    return this.respond(status, () => gatesFields(status))
  }
}
