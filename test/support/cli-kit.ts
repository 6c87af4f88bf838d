// A kit paired with a real host, driven through the CLI, for the tests of one describe block (or one file): a temp root, the
// kit's data dir, the CLI bound to it, project directories, and deploys into fresh departments.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, expect} from 'vitest'
import {type CliResult, runCli, setUpKit, writeProject} from './cli.js'
import {startTestHost, type TestHost, type TestHostOptions} from './host.js'

export interface DeployedWorker {
  url: string
  department: string
  /** The host's script name (the first path segment of the URL). */
  script: string
}

export interface KitWithHost {
  readonly root: string
  readonly dataDir: string
  /** The running host; set once the block's beforeAll ran. */
  readonly host: TestHost
  cli(...args: string[]): Promise<CliResult>
  /** Writes a project under the root; returns its directory. */
  project(name: string, files: Record<string, string | Buffer>): string
  /** Deploys `dir` into `department`, or into a new department of company acme; expects it completed. */
  deploy(dir: string, department?: string): Promise<DeployedWorker>
  /** Creates a new department of company acme; returns its id. */
  newDepartment(): Promise<string>
}

/** Registers the beforeAll/afterAll that start the host (`options` may name files under the root), pair the kit with it, and clean up. */
export function kitWithHost(label: string, options: TestHostOptions | ((root: string) => TestHostOptions)): KitWithHost {
  const root = mkdtempSync(path.join(tmpdir(), `edgeworkers-${label}-`))
  const dataDir = path.join(root, 'kit')
  let host: TestHost | undefined
  let departments = 0
  const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir])
  const newDepartment = async (): Promise<string> => {
    const name = `d${++departments}`
    expect((await cli('department', 'create', 'acme', name, '--id', name)).code).toBe(0)
    return name
  }

  beforeAll(async () => {
    host = await startTestHost(typeof options === 'function' ? options(root) : options)
    await setUpKit(cli, host)
  }, 120_000)
  afterAll(async () => {
    await host?.stop()
    rmSync(root, {recursive: true, force: true})
  })

  return {
    root,
    dataDir,
    get host(): TestHost {
      if (!host) throw new Error('the host starts in beforeAll')
      return host
    },
    cli,
    project: (name, files) => writeProject(root, name, files),
    newDepartment,
    async deploy(dir, department) {
      const name = department ?? (await newDepartment())
      const result = await cli('deploy', dir, '--department', name, '--json')
      expect({code: result.code, stderr: result.stderr}).toEqual({code: 0, stderr: expect.any(String)})
      const outcome = JSON.parse(result.stdout) as {state: string; url: string}
      expect(outcome.state).toBe('completed')
      return {url: outcome.url, department: name, script: new URL(outcome.url).pathname.split('/')[1]!}
    },
  }
}
