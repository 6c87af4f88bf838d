// An unknown command is a usage error: one line that names what was typed and, when it is close to
// a real command, what was probably meant — then exit 2, like every other usage error.
// (@oclif/plugin-not-found only suggests through an interactive prompt and exits 127.)
import type {Hook} from '@oclif/core'
import {ExitCode} from '../cli/exit-codes.js'
import {didYouMean} from '../did-you-mean.js'

const hook: Hook.CommandNotFound = async function (options) {
  // oclif joins every leading argument into the id (`deplyo ./x` → `deplyo:./x`): keep the words.
  const words: string[] = []
  for (const part of options.id.split(':')) {
    if (!/^[a-z][a-z0-9-]*$/i.test(part)) break
    words.push(part)
  }
  const typed = (words.length > 0 ? words : [options.id]).join(' ')
  const visible = options.config.commands.filter((command) => !command.hidden).map((command) => command.id.replaceAll(':', ' '))
  // Compare like with like: "fence beginn" against two-word commands, "deplyo" against one-word ones and topics.
  const sameDepth = new Set(visible.map((id) => id.split(' ').slice(0, Math.max(1, words.length)).join(' ')))
  const suggestion = didYouMean(typed, sameDepth)
  const hint = suggestion ? `; did you mean "${suggestion}"?` : `; run "${options.config.bin} help" for the list`
  process.stderr.write(`error: "${typed}" is not an ${options.config.bin} command${hint}\n`)
  process.exit(ExitCode.usage)
}

export default hook
