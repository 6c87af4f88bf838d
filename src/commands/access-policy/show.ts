import {BaseCommand} from '../../cli/base-command.js'
import {departmentArg} from '../../cli/control-command.js'
import {readControlState} from '../../engine/control/apply.js'

export default class AccessPolicyShow extends BaseCommand<typeof AccessPolicyShow> {
  static override description = `Show the access policy in front of a Worker: mode, IP allowlist, whether an API key is set (its last four), revision.

Exit codes: 0 shown; 5 unknown department or Worker; 6 no deployed release or no paired host; 10 host unreachable.`
  static override examples = ['<%= config.bin %> access-policy show acme-sales', '<%= config.bin %> access-policy show acme-sales --json']
  static override args = {department: departmentArg}
  static override enableJsonFlag = true

  async run() {
    const {target, state} = await readControlState(await this.engine(), this.args.department)
    const policy = state.accessPolicy
    return this.respond({department: this.args.department, scriptName: target.worker.script_name, accessPolicy: policy}, () =>
      [
        `worker       ${target.worker.script_name} (department ${this.args.department})`,
        `mode         ${policy.mode}`,
        `api key      ${policy.api_key_configured ? `set (…${policy.api_key_last_four ?? '????'})` : 'none'}`,
        `allowlist    ${policy.ip_allowlist.length > 0 ? policy.ip_allowlist.join(', ') : '-'}`,
        `revision     ${policy.revision} (updated ${policy.updated_at})`,
      ].join('\n'),
    )
  }
}
