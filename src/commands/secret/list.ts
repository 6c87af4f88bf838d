import {BaseCommand} from '../../cli/base-command.js'
import {departmentArg} from '../../cli/control-command.js'
import {table} from '../../cli/table.js'
import {readControlState} from '../../engine/control/apply.js'

export default class SecretList extends BaseCommand<typeof SecretList> {
  static override description = `List a Worker's secrets: names, shortened value digests and when each was set. Values are never shown.

Exit codes: 0 listed; 5 unknown department or Worker; 6 no deployed release or no paired host; 10 host unreachable.`
  static override examples = ['<%= config.bin %> secret list acme-sales', '<%= config.bin %> secret list acme-sales --json']
  static override args = {department: departmentArg}
  static override enableJsonFlag = true

  async run() {
    const {target, state} = await readControlState(await this.engine(), this.args.department)
    const secrets = state.secrets.map((secret) => ({name: secret.name, sha256: secret.sha256.slice(0, 12), updatedAt: secret.updated_at}))
    return this.respond({department: this.args.department, scriptName: target.worker.script_name, secrets}, () =>
      table(
        ['NAME', 'SHA256', 'UPDATED'],
        secrets.map((secret) => [secret.name, `${secret.sha256}…`, secret.updatedAt]),
        'no secrets',
      ),
    )
  }
}
