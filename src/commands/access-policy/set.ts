import * as Flags from '@oclif/core/flags'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../cli/control-command.js'
import {ACCESS_POLICY_MODES} from '../../engine/control/operations.js'
import {KitError} from '../../errors.js'

export default class AccessPolicySet extends ControlCommand<typeof AccessPolicySet> {
  static override description = `Replace the access policy in front of a Worker; the data plane enforces it within a second.

Modes: public (anyone); api_key (requests must send the key in x-api-key or Authorization: Bearer —
set one with \`api-key rotate\`, which also switches to this mode); teamsync_internal (only client
addresses in the --allow list; none = nobody). Refused requests get 403 {"code":"access_denied",
"message":"Forbidden"}. Kit-signed requests pass every policy. Leaving api_key mode drops the key.

${CONTROL_EXIT_CODES}`
  static override examples = [
    '<%= config.bin %> access-policy set acme-sales --mode public',
    '<%= config.bin %> access-policy set acme-sales --mode teamsync_internal --allow 10.0.0.0/8 --allow 192.168.1.7',
    '<%= config.bin %> access-policy set acme-sales --mode api_key --json',
  ]
  static override args = {department: departmentArg}
  static override enableJsonFlag = true
  static override flags = {
    mode: Flags.option({required: true, options: ACCESS_POLICY_MODES, description: 'Who may call the Worker'})(),
    allow: Flags.string({multiple: true, description: 'teamsync_internal: an IP address or CIDR block allowed through (repeatable)'}),
  }

  async run() {
    const mode = this.flags.mode
    const allow = this.flags.allow ?? []
    if (mode !== 'teamsync_internal' && allow.length > 0) throw new KitError('usage', '--allow goes with --mode teamsync_internal only')
    const {outcome} = await this.runControl({operation: 'access_policy.replace', mode, ipAllowlist: allow})
    return this.finish(outcome, outcome.current ? [`revision     ${String(outcome.current.revision)}`] : [])
  }
}
