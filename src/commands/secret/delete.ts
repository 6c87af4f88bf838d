import * as Args from '@oclif/core/args'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../cli/control-command.js'

export default class SecretDelete extends ControlCommand<typeof SecretDelete> {
  static override description = `Delete a Worker secret by name.

Deleting a name the Worker does not have is recorded as a no-op. ${CONTROL_EXIT_CODES}`
  static override examples = ['<%= config.bin %> secret delete acme-sales API_TOKEN', '<%= config.bin %> secret delete acme-sales API_TOKEN --json']
  static override args = {
    department: departmentArg,
    name: Args.string({required: true, description: 'Secret name'}),
  }
  static override enableJsonFlag = true

  async run() {
    const {outcome} = await this.runControl({operation: 'secrets.delete', name: this.args.name})
    return this.finish(outcome)
  }
}
