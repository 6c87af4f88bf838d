import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../../cli/control-command.js'

export default class CredentialsPut extends ControlCommand<typeof CredentialsPut> {
  static override description = `Deliver a service account's credentials to its department's Worker.

The Worker reads env.SERVICE_ACCOUNTS.<account> = {username, password}. The password comes from stdin
(one trailing newline dropped) or --password-file, never from the command line; only its SHA-256 is
recorded. The account must be a live service account of the department; the release must be built
with department-worker-project-v2.9 or newer.

${CONTROL_EXIT_CODES}`
  static override examples = [
    'printf %s "$PASSWORD" | <%= config.bin %> service-account credentials put acme-sales sa-robot --username robot',
    '<%= config.bin %> service-account credentials put acme-sales sa-robot --username robot --password-file ./pw --json',
  ]
  static override args = {
    department: departmentArg,
    account: Args.string({required: true, description: 'Service account id'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    username: Flags.string({required: true, description: 'The username the Worker presents'}),
    'password-file': Flags.string({description: 'Read the password from this file instead of stdin'}),
  }

  async run() {
    const password = await this.readSecretInput(this.flags['password-file'], 'password', '--password-file')
    const {outcome} = await this.runControl({
      operation: 'service_accounts.credentials.put',
      serviceAccountId: this.args.account,
      username: this.flags.username,
      password,
    })
    return this.finish(outcome)
  }
}
