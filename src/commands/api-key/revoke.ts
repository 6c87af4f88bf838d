import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../cli/control-command.js'

export default class ApiKeyRevoke extends ControlCommand<typeof ApiKeyRevoke> {
  static override description =
    `Revoke a Worker's API key. The policy stays in its mode: in api_key mode nobody gets through until \`api-key rotate\` issues a new key.

Revoking when no key is set is recorded as a no-op. ${CONTROL_EXIT_CODES}`
  static override examples = ['<%= config.bin %> api-key revoke acme-sales', '<%= config.bin %> api-key revoke acme-sales --json']
  static override args = {department: departmentArg}
  static override enableJsonFlag = true

  async run() {
    const {outcome} = await this.runControl({operation: 'access_policy.api_key.revoke'})
    return this.finish(outcome)
  }
}
