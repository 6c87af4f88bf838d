import {BaseCommand} from '../../cli/base-command.js'
import {envNameFor} from '../../config/load.js'
import {redactSettings} from '../../config/redact.js'

export default class ConfigShow extends BaseCommand<typeof ConfigShow> {
  static override description = 'Print the effective configuration and where each value came from (flag, env, file or default). Passwords in URLs are redacted.'
  static override examples = [
    '<%= config.bin %> config show',
    '<%= config.bin %> config show --json',
    'EDGEWORKERS_RECOVERY__BATCH_SIZE=20 <%= config.bin %> config show',
  ]
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const {sources, configFile} = this.loadSettings()
    const settings = redactSettings(this.loadSettings().settings)
    return this.respond({settings, sources, configFile}, () => {
      const lines = [`# config file: ${configFile ?? '(none; defaults and environment only)'}`]
      for (const [dotted, source] of Object.entries(sources)) {
        const value = dotted.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], settings)
        lines.push(`${dotted} = ${JSON.stringify(value)}  # ${source}${source === 'env' ? ` (${envNameFor(dotted)})` : ''}`)
      }
      return lines.join('\n')
    })
  }
}
