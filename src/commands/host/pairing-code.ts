import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {hostPairingCode} from '../../edge-host/host.js'

export default class HostPairingCode extends BaseCommand<typeof HostPairingCode> {
  static override description = `Print the edge host's one-time pairing code, read from its data dir on this machine.

A code pairs once. After it was used, --rotate issues a new one (the current pairing stays valid until
the new code is used). Exit codes: 0 printed, 5 no host state in the data dir, 6 code already used.`
  static override examples = [
    '<%= config.bin %> host pairing-code --data-dir /var/lib/edgeworkers-host',
    '<%= config.bin %> host pairing-code --data-dir /var/lib/edgeworkers-host --rotate',
  ]
  static override enableJsonFlag = true
  static override flags = {
    rotate: Flags.boolean({description: 'Issue a new code, replacing any unused one'}),
  }

  async run() {
    const code = hostPairingCode(this.settings.data_dir, {rotate: this.flags.rotate})
    return this.respond({code}, () => code)
  }
}
