import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../cli/control-command.js'

export default class SecretPut extends ControlCommand<typeof SecretPut> {
  static override description = `Set a Worker secret: the Worker reads it as the env binding of that name.

The value comes from stdin (one trailing newline dropped) or --from-file — never from the command
line — and is never echoed: the outbox, the audit log and the output keep only its SHA-256. Needs a
release built with department-worker-project-v2.6 or newer. The Worker sees the new value once its
shard restarts (well under a second), across redeploys and host restarts.

${CONTROL_EXIT_CODES}`
  static override examples = [
    'printf %s "$TOKEN" | <%= config.bin %> secret put acme-sales API_TOKEN',
    '<%= config.bin %> secret put acme-sales API_TOKEN --from-file ./token.txt --json',
  ]
  static override args = {
    department: departmentArg,
    name: Args.string({required: true, description: 'Secret name (an identifier: [A-Za-z_][A-Za-z0-9_]*, at most 64)'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    'from-file': Flags.string({description: 'Read the value from this file instead of stdin'}),
  }

  async run() {
    const value = await this.readSecretInput(this.flags['from-file'], 'secret value', '--from-file')
    const {outcome} = await this.runControl({operation: 'secrets.put', name: this.args.name, value})
    return this.finish(outcome, outcome.current ? [`sha256       ${String(outcome.current.sha256).slice(0, 12)}…`] : [])
  }
}
