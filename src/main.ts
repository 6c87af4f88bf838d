// The CLI's entry, bundled together with the commands so that they share one @oclif/core.
import {execute} from '@oclif/core'

/** Runs the command line; `dir` is bin/run.js's URL, from which oclif finds package.json. */
export async function run(dir: string): Promise<void> {
  await execute({dir})
}
