import {Args, Command, Flags, loadHelpClass} from '@oclif/core'

// `edgeworkers help [COMMAND]`, as @oclif/plugin-help answers it (and `--help`/`-h` anywhere).
export default class Help extends Command {
  static override description = 'Show help for edgeworkers or for one of its commands.'
  static override examples = ['<%= config.bin %> help', '<%= config.bin %> help deploy', '<%= config.bin %> help outbox retry']
  static override args = {command: Args.string({required: false, description: 'The command (or topic) to explain'})}
  static override flags = {
    'nested-commands': Flags.boolean({char: 'n', description: 'List the commands of every topic, nested ones too'}),
  }
  static override strict = false

  async run(): Promise<void> {
    const {argv, flags} = await this.parse(Help)
    const HelpClass = await loadHelpClass(this.config)
    await new HelpClass(this.config, {all: flags['nested-commands']}).showHelp(argv.map(String))
  }
}
