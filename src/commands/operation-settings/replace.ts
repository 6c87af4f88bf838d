import * as Args from '@oclif/core/args'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg, parseJsonArgument} from '../../cli/control-command.js'

export default class OperationSettingsReplace extends ControlCommand<typeof OperationSettingsReplace> {
  static override description =
    `Replace the operation settings of a Worker's deployed release: a JSON object (at most 64 KiB), bound to that release generation.

The Worker reads them as the JSON env binding OPERATION_SETTINGS. Their SHA-256 (of the canonical
JSON, shown as settingsSha256) is what \`deploy --operation-settings-digest\` carries.

${CONTROL_EXIT_CODES}`
  static override examples = [
    `<%= config.bin %> operation-settings replace acme-sales '{"export":{"enabled":false}}'`,
    `<%= config.bin %> operation-settings replace acme-sales '{"export":{"enabled":true}}' --json`,
  ]
  static override args = {
    department: departmentArg,
    json: Args.string({required: true, description: 'The settings: a JSON object'}),
  }
  static override enableJsonFlag = true

  async run() {
    const settings = parseJsonArgument(this.args.json, 'the operation settings')
    const {outcome} = await this.runControl({operation: 'operation_settings.replace', settings})
    return this.finish(
      outcome,
      outcome.current ? [`revision     ${String(outcome.current.revision)}`, `settings     ${String(outcome.current.settingsSha256)}`] : [],
    )
  }
}
