import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../cli/control-command.js'

export default class OperationSettingsRevoke extends ControlCommand<typeof OperationSettingsRevoke> {
  static override description = `Revoke a Worker's operation settings (OPERATION_SETTINGS disappears from its env).

Revoking when none are set is recorded as a no-op. ${CONTROL_EXIT_CODES}`
  static override examples = ['<%= config.bin %> operation-settings revoke acme-sales', '<%= config.bin %> operation-settings revoke acme-sales --json']
  static override args = {department: departmentArg}
  static override enableJsonFlag = true

  async run() {
    const {outcome} = await this.runControl({operation: 'operation_settings.revoke'})
    return this.finish(outcome)
  }
}
