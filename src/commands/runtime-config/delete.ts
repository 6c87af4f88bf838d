import * as Args from '@oclif/core/args'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../cli/control-command.js'

export default class RuntimeConfigDelete extends ControlCommand<typeof RuntimeConfigDelete> {
  static override description = `Delete one runtime-config key of a Worker (env.RUNTIME_CONFIG.<KEY> disappears).

${CONTROL_EXIT_CODES}`
  static override examples = [
    '<%= config.bin %> runtime-config delete acme-sales FEATURES',
    '<%= config.bin %> runtime-config delete acme-sales FEATURES --json',
  ]
  static override args = {
    department: departmentArg,
    key: Args.string({required: true, description: 'Key'}),
  }
  static override enableJsonFlag = true

  async run() {
    const {outcome} = await this.runControl({operation: 'runtime_config.delete', key: this.args.key})
    return this.finish(outcome, outcome.current ? [`revision     ${String(outcome.current.revision)}`] : [])
  }
}
