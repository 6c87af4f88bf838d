// The built CLI (bin/run.js with its oclif manifest: `npm run build` first), run as users run it.
import {execFile} from 'node:child_process'
import {fileURLToPath} from 'node:url'

const CLI_BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))

/** Runs the CLI to completion; the caller's EDGEWORKERS_DATA_DIR/CONFIG never leak in. */
export function runCli(args: string[]): Promise<{code: number; stdout: string; stderr: string}> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_BIN, ...args],
      {env: {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined}},
      (error, stdout, stderr) => resolve({code: error ? Number(error.code) : 0, stdout, stderr}),
    )
  })
}
