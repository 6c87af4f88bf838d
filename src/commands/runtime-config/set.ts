import * as Args from '@oclif/core/args'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg, parseJsonArgument} from '../../cli/control-command.js'

export default class RuntimeConfigSet extends ControlCommand<typeof RuntimeConfigSet> {
  static override description = `Set one runtime-config key of a Worker to a JSON object (at most 64 KiB of UTF-8, stored canonically).

The Worker reads its runtime config as the JSON env binding RUNTIME_CONFIG: env.RUNTIME_CONFIG.<KEY>
is the object. Not secret: use \`secret put\` for secrets.

${CONTROL_EXIT_CODES}`
  static override examples = [
    `<%= config.bin %> runtime-config set acme-sales FEATURES '{"beta":true,"limit":10}'`,
    `<%= config.bin %> runtime-config set acme-sales FEATURES '{"beta":false}' --json`,
  ]
  static override args = {
    department: departmentArg,
    key: Args.string({required: true, description: 'Key (an identifier: [A-Za-z_][A-Za-z0-9_]*, at most 64)'}),
    json: Args.string({required: true, description: 'The value: a JSON object'}),
  }
  static override enableJsonFlag = true

  async run() {
    const value = parseJsonArgument(this.args.json, 'the runtime-config value')
    const {outcome} = await this.runControl({operation: 'runtime_config.replace', key: this.args.key, value})
    return this.finish(outcome, outcome.current ? [`revision     ${String(outcome.current.revision)}`] : [])
  }
}
