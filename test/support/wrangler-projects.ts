// The workspace the wrangler-project tests deploy from: one temporary root holding the npm packages
// the projects import (one install, resolved upwards from each project below it), a kit data
// directory paired with one real edge host, and a department per deploy.
import {execFile} from 'node:child_process'
import {cpSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {promisify} from 'node:util'
import {afterAll, beforeAll} from 'vitest'
import {type CliResult, runCli, setUpKit, writeProject} from './cli.js'
import {startTestHost, type TestHost} from './host.js'

export interface WranglerProjects {
  root: string
  cli: (...args: string[]) => Promise<CliResult>
  /** Writes a project under the root; returns its directory. */
  project: (name: string, files: Record<string, string | Buffer>) => string
  /** A fresh department id, for one deploy. */
  nextDepartment: () => string
}

/**
 * Registers the beforeAll (npm install while the host starts, then kit setup) and afterAll of a test
 * file. The root installs either `packages`, or is a copy of `{workspace}`: an npm workspace whose
 * package.json and package-lock.json it installs with `npm ci` (its node_modules is not copied).
 */
export function wranglerProjectsWorkspace(name: string, packages: Record<string, string> | {workspace: string}): WranglerProjects {
  const root = mkdtempSync(path.join(tmpdir(), `edgeworkers-${name}-`))
  const dataDir = path.join(root, 'kit')
  const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir])
  let host: TestHost | undefined
  let departments = 0
  beforeAll(async () => {
    let command = 'install'
    if ('workspace' in packages) {
      const from = packages.workspace
      cpSync(from, root, {recursive: true, filter: (source) => path.relative(from, source).split(path.sep)[0] !== 'node_modules'})
      command = 'ci'
    } else writeFileSync(path.join(root, 'package.json'), JSON.stringify({name, private: true, dependencies: packages}))
    const install = promisify(execFile)('npm', [command, '--no-audit', '--no-fund', '--prefer-offline'], {cwd: root})
    host = await startTestHost({settings: {shards: 1}})
    await install
    await setUpKit(cli, host)
  }, 240_000)
  afterAll(async () => {
    await host?.stop()
    rmSync(root, {recursive: true, force: true})
  })
  return {root, cli, project: (project, files) => writeProject(root, project, files), nextDepartment: () => `d${++departments}`}
}
