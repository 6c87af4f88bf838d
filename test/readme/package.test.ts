// The release artifact is `npm pack`'s tarball (README "Install"). It must hold what the CLI needs at
// run time — bin, the built commands, the oclif manifest, the quickstart fixture, the systemd units and
// the docs — and nothing of the
// tests, and the CLI must run from it: here from the unpacked tarball with the clone's installed
// dependencies standing in for the ones `npm install -g` fetches.
import {execFile} from 'node:child_process'
import {mkdtempSync, rmSync, symlinkSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'
import {afterAll, expect, test} from 'vitest'
import {runCli} from '../support/cli.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const run = promisify(execFile)
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-pack-'))
afterAll(() => rmSync(workDir, {recursive: true, force: true}))

test('npm pack holds the runnable CLI, and the unpacked tarball runs quickstart end to end', {timeout: 180_000}, async () => {
  // dist/ is built (npm test builds first), so skip prepare's second build.
  const {stdout} = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', workDir], {cwd: ROOT})
  const [packed] = JSON.parse(stdout) as Array<{filename: string; files: Array<{path: string}>}>
  const files = packed!.files.map((file) => file.path)
  expect(files).toEqual(
    expect.arrayContaining([
      'bin/run.js',
      'oclif.manifest.json',
      'package.json',
      'dist/commands/deploy.js',
      'dist/hooks/command-not-found.js',
      'fixtures/workers/hello/edgeworker.json',
      // An operator installing from the tarball finds the systemd units and the docs README links to.
      'deploy/systemd/edgeworkers-host.service',
      'deploy/systemd/edgeworkers-reconcile.service',
      'deploy/systemd/edgeworkers-reconcile.timer',
      'docs/architecture.md',
      'docs/management-api.md',
      // The units' Documentation= page.
      'docs/scheduling.md',
      'README.md',
    ]),
  )
  expect(files.filter((file) => file.startsWith('test/') || file.startsWith('src/') || file.startsWith('bench/'))).toEqual([])

  await run('tar', ['-xzf', path.join(workDir, packed!.filename), '-C', workDir])
  const unpacked = path.join(workDir, 'package')
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(unpacked, 'node_modules'))
  const bin = path.join(unpacked, 'bin', 'run.js')
  const version = await runCli(['--version'], {}, bin)
  expect(version.stdout).toMatch(/^edgeworkers\/\d+\.\d+\.\d+ /)

  const quickstart = await runCli(['quickstart', '--json', '--data-dir', path.join(workDir, 'data')], {}, bin)
  expect(quickstart.code).toBe(0)
  const result = JSON.parse(quickstart.stdout) as {deploy: {state: string}; response: {status: number}; retiredResponse: {status: number}}
  expect([result.deploy.state, result.response.status, result.retiredResponse.status]).toEqual(['completed', 200, 404])
})
