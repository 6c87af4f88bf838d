// Tests run the CLI exactly as users do: the built bin/run.js with its oclif manifest. `npm test`
// builds first (the pretest script), so dist/ always matches the sources under test.
import {execFile} from 'node:child_process'
import {mkdirSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect} from 'vitest'

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

/** A one-module edgeworker.json project under `<root>/projects/<name>`, its index.js `source`. */
export function moduleProject(root: string, name: string, source: string): string {
  const manifest = {
    name: 'text',
    main: 'index.js',
    modules: ['index.js'],
    compatibilityDate: '2026-11-01',
    builderPolicy: 'department-worker-project-v2.9',
    staticData: {},
    dependencies: {},
  }
  return writeProject(root, name, {'edgeworker.json': JSON.stringify(manifest), 'index.js': source})
}

/** A one-module edgeworker.json project whose Worker answers `text`. */
export function textProject(root: string, text: string): string {
  return moduleProject(root, text.replace(/\W+/g, '-'), `export default {fetch: () => new Response(${JSON.stringify(text)})}\n`)
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

/** An assets-only wrangler site (`public/` holding these files) under `root`; returns its directory. */
export function writeAssetsSite(root: string, name: string, files: Record<string, string>): string {
  const publicFiles = Object.fromEntries(Object.entries(files).map(([file, content]) => [`public/${file}`, content]))
  const toml = 'name = "site"\ncompatibility_date = "2026-11-01"\n[assets]\ndirectory = "public"\n'
  return writeProject(root, name, {'wrangler.toml': toml, ...publicFiles})
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

export interface DeployRefusal {
  /** Names the case in a failed assertion. */
  name: string
  dir: string
  message: string
}

/**
 * Deploys every project into `department` at once — each is refused at build, before the host is
 * asked, so they do not interact — and expects each refused with exit 2 in one line that holds its message.
 */
export async function expectDeployRefusals(cli: (...args: string[]) => Promise<CliResult>, department: string, refusals: DeployRefusal[]): Promise<void> {
  const results = await Promise.all(refusals.map(({dir}) => cli('deploy', dir, '--department', department)))
  const seen = results.map((result, index) => ({
    name: refusals[index]!.name,
    code: result.code,
    lines: result.stderr.trim().split('\n').length,
    says: result.stderr.includes(refusals[index]!.message) ? 'its message' : result.stderr,
  }))
  expect(seen).toEqual(refusals.map(({name}) => ({name, code: 2, lines: 1, says: 'its message'})))
}
