// The README's walk-throughs, run verbatim: its two shell blocks (the host in one terminal, the kit in
// another) from a fresh directory with `edgeworkers` on PATH, as an operator following only the
// README would, and the "Coming from wrangler" block on a kit set up as the walk-through leaves it.
// A step that fails fails its test.
import {spawn, type ChildProcess} from 'node:child_process'
import {chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {afterAll, expect, test} from 'vitest'
import {CLI_BIN, runCli, setUpKit} from '../support/cli.js'
import {startTestHost} from '../support/host.js'

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

/** Runs a README block to its end as bash -euo pipefail would in a terminal; what it printed and its exit code. */
async function runBlock(name: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{code: number | null; stdout: string; stderr: string}> {
  const block = spawn('bash', ['-euo', 'pipefail', '-c', walkthroughBlock(name)], {cwd, env, stdio: ['ignore', 'pipe', 'pipe']})
  let stdout = ''
  let stderr = ''
  block.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  block.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => block.once('exit', resolve))
  return {code, stdout, stderr}
}

test('the README walk-through reaches a served Worker, then a retired one, with no step failing', {timeout: 240_000}, async () => {
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

  const {code, stdout, stderr} = await runBlock('kit', operator, env)
  expect({code, stderr}).toEqual({code: 0, stderr: expect.not.stringContaining('error:')})
  expect(stdout).toContain('Hello from an Edge Worker! (GET /)')
  expect(stdout).toContain('"code":"worker_not_found"')
  expect(stdout).toContain('retired: its URL now answers 404 worker_not_found')
})

test('the "Coming from wrangler" block: init with a department, dry-run, deploy, an env as its own Worker, [script] and -c', {timeout: 300_000}, async () => {
  const {dir: operator, PATH} = operatorDir('wrangler')
  const dataDir = path.join(operator, '.edgeworkers')
  const host = await startTestHost({settings: {shards: 1}})
  try {
    const cli = (...args: string[]) => runCli([...args, '--data-dir', dataDir])
    await setUpKit(cli, host, [['department', 'create', 'acme', 'Sales', '--id', 'acme-sales']])
    // HOME stays the runner's so npm install uses its cache.
    const env: NodeJS.ProcessEnv = {...process.env, PATH, EDGEWORKERS_DATA_DIR: dataDir, npm_config_prefer_offline: 'true'}
    const {code, stdout, stderr} = await runBlock('wrangler', operator, env)
    expect({code, stderr}).toEqual({code: 0, stderr: expect.not.stringContaining('error:')})
    expect(stdout).toContain('Staging: hello from api (Hono)!')
    const workers = JSON.parse((await cli('worker', 'show', 'acme-sales', '--json')).stdout) as {url: string}
    const production = await fetch(workers.url)
    expect(await production.text()).toBe('Hello from api (Hono)!\n')

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
    expect(await (await fetch(workers.url)).text()).toBe('Staging: hello from api (Hono)!\n')
  } finally {
    await host.stop()
  }
})
