import * as Args from '@oclif/core/args'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../../cli/control-command.js'

export default class CredentialsDelete extends ControlCommand<typeof CredentialsDelete> {
  static override description = `Remove a service account's credentials from its department's Worker.

Deleting credentials the Worker does not hold is recorded as a no-op. ${CONTROL_EXIT_CODES}`
  static override examples = [
    '<%= config.bin %> service-account credentials delete acme-sales sa-robot',
    '<%= config.bin %> service-account credentials delete acme-sales sa-robot --json',
  ]
  static override args = {
    department: departmentArg,
    account: Args.string({required: true, description: 'Service account id'}),
  }
  static override enableJsonFlag = true

  async run() {
    const {outcome} = await this.runControl({operation: 'service_accounts.credentials.delete', serviceAccountId: this.args.account})
    return this.finish(outcome)
  }
}
