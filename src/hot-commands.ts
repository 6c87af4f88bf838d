// The entry of dist/hot-commands.cjs: the commands (all but scripts/bundle.mjs's ESM_ONLY), bundled as
// one CommonJS file with oclif, so that main.ts can compile it with a V8 code cache (./code-cache.ts).
// oclif still loads the configuration, the manifest and the hooks and runs the command as for any
// other; only the class comes from this bundle rather than from its ES module in dist/commands.
import {Config} from '@oclif/core/config'
import {execute} from '@oclif/core/execute'
import COMMANDS from 'hot-command-table'

/** Runs the command line as bin/run.js does; `dir` is bin/run.js's URL. */
export async function run(dir: string): Promise<void> {
  const config = await Config.load(dir)
  for (const [id, load] of Object.entries(COMMANDS)) {
    const loadable = config.findCommand(id)
    if (!loadable) continue
    // What oclif's Plugin.findCommand sets on a class it imports.
    loadable.load = async () =>
      Object.assign((await load()).default, {
        id,
        plugin: config.plugins.get(loadable.pluginName ?? ''),
        isESM: loadable.isESM,
        relativePath: loadable.relativePath,
      })
  }
  await execute({loadOptions: config})
}
