// Tests run the CLI exactly as users do: the built bin/run.js with its oclif manifest. `npm test`
// builds first (the pretest script), so dist/ always matches the sources under test.
import {execFile} from 'node:child_process'
import {mkdirSync, writeFileSync} from 'node:fs'
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

/** Writes a project's files under `<root>/projects/<name>` (directories made as needed); returns its directory. */
export function writeProject(root: string, name: string, files: Record<string, string | Buffer>): string {
  const dir = path.join(root, 'projects', name)
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), {recursive: true})
    writeFileSync(path.join(dir, file), content)
  }
  return dir
}

/** Through the CLI: migrates the kit's store, pairs it with the host and creates company `acme`, then runs `more`; each must exit 0. */
export async function setUpKit(
  cli: (...args: string[]) => Promise<CliResult>,
  host: {adminUrl: string; pairingCode?: string | null},
  more: string[][] = [],
): Promise<void> {
  for (const args of [
    ['db', 'migrate'],
    ['host', 'pair', host.adminUrl, '--code', host.pairingCode!],
    ['company', 'create', 'Acme', '--id', 'acme'],
    ...more,
  ]) {
    const result = await cli(...args)
    if (result.code !== 0) throw new Error(`${args.join(' ')} exited ${result.code}: ${result.stderr}`)
  }
}
