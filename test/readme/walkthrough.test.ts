// The README's walk-through, run verbatim: its two shell blocks (the host in one terminal, the kit in
// another) from a fresh directory with `edgeworkers` on PATH, as an operator following only the
// README would. A step that fails fails this test.
import {spawn, type ChildProcess} from 'node:child_process'
import {chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {afterAll, expect, test} from 'vitest'
import {CLI_BIN} from '../support/cli.js'

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

test('the README walk-through reaches a served Worker, then a retired one, with no step failing', {timeout: 240_000}, async () => {
  const bin = path.join(workDir, 'bin')
  const shim = path.join(bin, 'edgeworkers')
  mkdirSync(bin)
  writeFileSync(shim, `#!/bin/sh\nexec "${process.execPath}" "${CLI_BIN}" "$@"\n`)
  chmodSync(shim, 0o755)
  symlinkSync(path.join(ROOT, 'fixtures'), path.join(workDir, 'fixtures'))
  const env: NodeJS.ProcessEnv = {PATH: `${bin}:${process.env.PATH}`, HOME: workDir, LANG: 'C.UTF-8'}

  host = spawn('bash', ['-euo', 'pipefail', '-c', walkthroughBlock('host')], {cwd: workDir, env, stdio: ['ignore', 'ignore', 'pipe']})
  let hostErr = ''
  await new Promise<void>((resolve, reject) => {
    host!.stderr!.on('data', (chunk: Buffer) => {
      hostErr += chunk.toString()
      if (hostErr.includes('pairing code:')) resolve()
    })
    host!.once('exit', (code) => reject(new Error(`host serve exited ${code}: ${hostErr}`)))
  })

  const kit = spawn('bash', ['-euo', 'pipefail', '-c', walkthroughBlock('kit')], {cwd: workDir, env, stdio: ['ignore', 'pipe', 'pipe']})
  let stdout = ''
  let stderr = ''
  kit.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  kit.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => kit.once('exit', resolve))
  expect({code, stderr}).toEqual({code: 0, stderr: expect.not.stringContaining('error:')})
  expect(stdout).toContain('Hello from an Edge Worker! (GET /)')
  expect(stdout).toContain('"code":"worker_not_found"')
  expect(stdout).toContain('retired: its URL now answers 404 worker_not_found')
})
