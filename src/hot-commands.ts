// The entry of dist/hot-commands.cjs: the commands in main.ts's HOT_COMMANDS, bundled as one CommonJS
// file with oclif, so that main.ts can compile it with a V8 code cache (./code-cache.ts). oclif still
// loads the configuration, the manifest and the hooks and runs the command as for any other; only
// the class comes from this bundle rather than from its ES module in dist/commands.
import type {Command} from '@oclif/core/command'
import {Config} from '@oclif/core/config'
import {execute} from '@oclif/core/execute'
import Reconcile from './commands/reconcile.js'
import type {HotCommandId} from './main.js'

const COMMANDS: Record<HotCommandId, Command.Class> = {reconcile: Reconcile}

/** Runs the command line as bin/run.js does; `dir` is bin/run.js's URL. */
export async function run(dir: string): Promise<void> {
  const config = await Config.load(dir)
  for (const [id, command] of Object.entries(COMMANDS)) {
    const loadable = config.findCommand(id)
    if (!loadable) continue
    // What oclif's Plugin.findCommand sets on a class it imports.
    loadable.load = async () =>
      Object.assign(command, {id, plugin: config.plugins.get(loadable.pluginName ?? ''), isESM: loadable.isESM, relativePath: loadable.relativePath})
  }
  await execute({loadOptions: config})
}
