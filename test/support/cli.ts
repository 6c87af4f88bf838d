// Tests run the CLI exactly as users do: the built bin/run.js with its oclif manifest. `npm test`
// builds first (the pretest script), so dist/ always matches the sources under test.
import {execFile} from 'node:child_process'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

export const CLI_BIN = path.join(fileURLToPath(new URL('../..', import.meta.url)), 'bin', 'run.js')

export interface CliResult {
  code: number
  stdout: string
  stderr: string
}

/** Runs the CLI (`bin`: another copy's bin/run.js) to completion. The caller's EDGEWORKERS_DATA_DIR/CONFIG never leak in; `env` is applied last. */
export function runCli(args: string[], env: Record<string, string | undefined> = {}, bin = CLI_BIN): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      {env: {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined, ...env}},
      (error, stdout, stderr) => resolve({code: error ? Number(error.code) : 0, stdout, stderr}),
    )
  })
}
