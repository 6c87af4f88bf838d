// The table scripts/bundle.mjs generates for dist/hot-commands.cjs from the files of src/commands.
declare module 'hot-command-table' {
  import type {Command} from '@oclif/core/command'

  /** Each hot command's module by its oclif id (`worker:list`), loaded when asked for. */
  const commands: Record<string, () => Promise<{default: Command.Class}>>
  export default commands
}
