import {open} from 'node:fs/promises'
import * as Flags from '@oclif/core/flags'
import {CONTROL_EXIT_CODES, ControlCommand, departmentArg} from '../../cli/control-command.js'
import {KitError} from '../../errors.js'

export default class ApiKeyRotate extends ControlCommand<typeof ApiKeyRotate> {
  static override description = `Issue a new API key for a Worker and require it (the policy switches to api_key mode).

The key is shown once — on stdout, or written to --key-file (created 0600; required with --json, so
JSON output never carries it). The host and the kit keep only its SHA-256 and last four. The old
key stops working within a second.

${CONTROL_EXIT_CODES}`
  static override examples = ['<%= config.bin %> api-key rotate acme-sales', '<%= config.bin %> api-key rotate acme-sales --key-file ./acme-sales.key --json']
  static override args = {department: departmentArg}
  static override enableJsonFlag = true
  static override flags = {
    'key-file': Flags.string({description: 'Write the new key to this file (must not exist) instead of stdout'}),
  }

  async run() {
    const keyFile = this.flags['key-file']
    if (this.jsonEnabled() && keyFile === undefined) throw new KitError('usage', '--json needs --key-file: the key is never part of JSON output')
    // Created before anything changes, so a bad path refuses the rotation instead of losing the key.
    const handle =
      keyFile === undefined
        ? undefined
        : await open(keyFile, 'wx', 0o600).catch((error: NodeJS.ErrnoException) => {
            throw new KitError('usage', `cannot create ${keyFile}: ${error.code ?? error.message}`)
          })
    try {
      const {outcome, apiKey} = await this.runControl({operation: 'access_policy.api_key.rotate'})
      if (handle && apiKey) await handle.writeFile(`${apiKey}\n`)
      const where =
        apiKey === undefined ? [] : keyFile === undefined ? [`api key      ${apiKey}   (shown once; store it now)`] : [`api key      written to ${keyFile}`]
      return this.finish(outcome, [`last four    ${outcome.current?.api_key_last_four ?? apiKey?.slice(-4) ?? '-'}`, ...where], {
        ...outcome,
        ...(keyFile ? {keyFile} : {}),
      })
    } finally {
      await handle?.close()
    }
  }
}
