// The README followed top to bottom as a newcomer would, every command block a test can run run
// verbatim, in order, in one fresh directory with `edgeworkers` on PATH: the host in one terminal
// (its own process), then in a second terminal the walk-through, shell completion, "Coming from
// wrangler", the control commands, status and a backup. Blocks no test can run say why in README
// (`<!-- not-run: … -->`; test/unit/readme/blocks.test.ts holds every block to one or the other). A
// step that fails fails the test.
import {spawn, type ChildProcess} from 'node:child_process'
import {chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {homedir, tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {afterAll, expect, test} from 'vitest'
import {CLI_BIN, runCli} from '../support/cli.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** The ```sh block right after `<!-- walkthrough:<name> -->` in README.md. */
function walkthroughBlock(name: string): string {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const match = new RegExp(`<!-- walkthrough:${name} -->\\n\`\`\`sh\\n([\\s\\S]*?)\`\`\``).exec(readme)
  if (!match) throw new Error(`README.md has no walkthrough:${name} block`)
  return match[1]!
}

const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-readme-'))
let host: ChildProcess | undefined
afterAll(async () => {
  if (host?.exitCode === null) {
    host.kill('SIGTERM')
    await new Promise((resolve) => host!.once('exit', resolve))
  }
  rmSync(workDir, {recursive: true, force: true})
})

/** A directory under workDir whose bin/ puts this checkout's `edgeworkers` on PATH; returns its PATH. */
function operatorDir(name: string): {dir: string; PATH: string} {
  const dir = path.join(workDir, name)
  const bin = path.join(dir, 'bin')
  mkdirSync(bin, {recursive: true})
  writeFileSync(path.join(bin, 'edgeworkers'), `#!/bin/sh\nexec "${process.execPath}" "${CLI_BIN}" "$@"\n`)
  chmodSync(path.join(bin, 'edgeworkers'), 0o755)
  return {dir, PATH: `${bin}:${process.env.PATH}`}
}

/** Runs a README block (or `script`, what the test makes of it) to its end as bash -euo pipefail would in a terminal. */
async function runBlock(
  name: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  script = walkthroughBlock(name),
): Promise<{code: number | null; stdout: string; stderr: string}> {
  const block = spawn('bash', ['-euo', 'pipefail', '-c', script], {cwd, env, stdio: ['ignore', 'pipe', 'pipe']})
  let stdout = ''
  let stderr = ''
  block.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  block.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => block.once('exit', resolve))
  return {code, stdout, stderr}
}

/** A block that ran to its end with no error line. */
function succeeded(name: string, result: {code: number | null; stdout: string; stderr: string}): string {
  expect({name, code: result.code, stderr: result.stderr}).toEqual({name, code: 0, stderr: expect.not.stringContaining('error:')})
  return result.stdout
}

test('the README, top to bottom: walk-through, completion, Coming from wrangler, control commands, status, a backup', {timeout: 600_000}, async () => {
  const {dir: operator, PATH} = operatorDir('walkthrough')
  symlinkSync(path.join(ROOT, 'fixtures'), path.join(operator, 'fixtures'))
  const env: NodeJS.ProcessEnv = {PATH, HOME: operator, LANG: 'C.UTF-8'}

  host = spawn('bash', ['-euo', 'pipefail', '-c', walkthroughBlock('host')], {cwd: operator, env, stdio: ['ignore', 'ignore', 'pipe']})
  let hostErr = ''
  await new Promise<void>((resolve, reject) => {
    host!.stderr!.on('data', (chunk: Buffer) => {
      hostErr += chunk.toString()
      if (hostErr.includes('pairing code:')) resolve()
    })
    host!.once('exit', (code) => reject(new Error(`host serve exited ${code}: ${hostErr}`)))
  })

  const walkthrough = succeeded('kit', await runBlock('kit', operator, env))
  expect(walkthrough).toContain('Hello from an Edge Worker! (GET /)')
  expect(walkthrough).toContain('"code":"worker_not_found"')
  expect(walkthrough).toContain('retired: its URL now answers 404 worker_not_found')

  expect(succeeded('autocomplete', await runBlock('autocomplete', operator, env))).toContain('edgeworkers autocomplete script bash')

  // The same terminal as the walk-through's second one: its export holds. npm install uses the runner's cache.
  const dataDir = path.join(operator, '.edgeworkers')
  const terminal: NodeJS.ProcessEnv = {
    ...env,
    EDGEWORKERS_DATA_DIR: dataDir,
    npm_config_cache: process.env.npm_config_cache ?? path.join(homedir(), '.npm'),
    npm_config_prefer_offline: 'true',
  }
  const cli = (...args: string[]) => runCli([...args, '--data-dir', dataDir])
  expect(succeeded('wrangler', await runBlock('wrangler', operator, terminal))).toContain('Staging: hello from api (Hono)!')
  const production = JSON.parse((await cli('worker', 'show', 'acme-sales', '--json')).stdout) as {url: string; worker: {id: string}}
  expect(await (await fetch(production.url)).text()).toBe('Hello from api (Hono)!\n')

  // The env onto the production department: refused, nothing written, unless asked.
  const before = (await cli('worker', 'show', 'acme-sales', '--json')).stdout
  const onto = await cli('deploy', path.join(operator, 'api'), '--env', 'staging', '--department', 'acme-sales')
  expect({code: onto.code, stderr: onto.stderr}).toEqual({
    code: 2,
    stderr:
      "error: --env staging would replace the production Worker of acme-sales (the top level's [edgeworkers] department); deploy the env to its own department (default acme-sales-staging) or pass --onto-production\n",
  })
  expect((await cli('worker', 'show', 'acme-sales', '--json')).stdout).toBe(before)
  const asked = await cli('deploy', path.join(operator, 'api'), '--env', 'staging', '--department', 'acme-sales', '--onto-production')
  expect(asked.code).toBe(0)
  expect(await (await fetch(production.url)).text()).toBe('Staging: hello from api (Hono)!\n')

  // The service account is named by its name, as created in the wrangler block.
  succeeded('control-plane', await runBlock('control-plane', operator, {...terminal, TOKEN: 'token-value', PW: 'robot-password'}))
  expect(statSync(path.join(operator, 'acme.key')).mode & 0o777).toBe(0o600)

  // Outside a terminal, one snapshot each; exit 0: nothing needs attention.
  succeeded('status', await runBlock('status', operator, terminal))

  // /backups is the operator's; here a directory of the test's.
  const backupRoot = path.join(operator, 'backups')
  mkdirSync(backupRoot)
  succeeded('backup', await runBlock('backup', operator, terminal, walkthroughBlock('backup').replaceAll('/backups/', `${backupRoot}/`)))
  const [backup] = readdirSync(backupRoot)
  expect(JSON.parse(readFileSync(path.join(backupRoot, backup!, 'manifest.json'), 'utf8'))).toMatchObject({store: {backend: 'sqlite'}})

  // Ids as git takes them: the 8 characters the status view shows name a Worker and a fence.
  const byPrefix = await cli('worker', 'show', production.worker.id.slice(0, 8), '--json')
  expect(byPrefix.code, byPrefix.stderr).toBe(0)
  expect(byPrefix.stdout).toBe((await cli('worker', 'show', 'acme-sales', '--json')).stdout)
  const fence = JSON.parse((await cli('fence', 'begin', '--ttl', '10m', '--json')).stdout) as {id: string}
  const ended = await cli('fence', 'end', fence.id.slice(0, 8), '--json')
  expect(ended.code, ended.stderr).toBe(0)
  expect(JSON.parse(ended.stdout)).toMatchObject({fence: {id: fence.id}})
})
