import {BaseCommand} from '../../cli/base-command.js'
import {gatesFields} from '../../cli/gates-render.js'
import {setMaintenance} from '../../engine/maintenance.js'

export default class MaintenanceOff extends BaseCommand<typeof MaintenanceOff> {
  static override description = `Turn the maintenance gate off: deploys are accepted again (a pending restore still refuses them).

Exit codes: 0 off (also when it was already off); 6 the store is not paired.`
  static override examples = ['<%= config.bin %> maintenance off']
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const status = await setMaintenance(await this.engine(), {on: false, actor: this.operator})
    return this.respond(status, () => gatesFields(status))
  }
}
