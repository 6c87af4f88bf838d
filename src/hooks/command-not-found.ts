// An unknown command is a usage error: one line that names what was typed and, when it is close to
// a real command, what was probably meant — then exit 2, like every other usage error.
// (@oclif/plugin-not-found only suggests through an interactive prompt and exits 127.)
import type {Hook} from '@oclif/core/interfaces'
import {ExitCode} from '../cli/exit-codes.js'
import {didYouMean} from '../did-you-mean.js'

const hook: Hook.CommandNotFound = async (options) => {
  // oclif joins every leading argument into the id (`deplyo ./x` → `deplyo:./x`): keep the words.
  const words: string[] = []
  for (const part of options.id.split(':')) {
    if (!/^[a-z][a-z0-9-]*$/i.test(part)) break
    words.push(part)
  }
  const visible = options.config.commands.filter((command) => !command.hidden).map((command) => command.id.split(':'))
  // The words may run into the arguments (`deplyo chat-ws`): try the longest run of words first, each
  // against commands and topics of that many words, and keep the first that resembles one.
  let typed = (words.length > 0 ? words : [options.id]).join(' ')
  let suggestion: string | undefined
  for (let count = words.length; count >= 1 && !suggestion; count--) {
    const prefix = words.slice(0, count).join(' ')
    suggestion = didYouMean(prefix, new Set(visible.filter((id) => id.length >= count).map((id) => id.slice(0, count).join(' '))))
    if (suggestion) typed = prefix
  }
  const hint = suggestion ? `; did you mean "${suggestion}"?` : `; run "${options.config.bin} help" for the list`
  process.stderr.write(`error: "${typed}" is not an ${options.config.bin} command${hint}\n`)
  process.exit(ExitCode.usage)
}

export default hook
