// `edgeworkers retire` and `edgeworkers orphan-report` through the real CLI (a child process per run)
// on a SQLite data dir: bad input refused with one line, its documented exit code and nothing
// written; a host that cannot be told leaves the retirement pending (exit 7). The host paths are
// covered against a real host in ./retire.test.ts.
import {execFile, spawn} from 'node:child_process'
import {mkdtempSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore, scriptNameFor, type Store} from '../../src/store/index.js'
import {CLI_BIN as CLI} from '../support/cli.js'

interface CliResult {
  code: number
  stdout: string
  stderr: string
}

let store: Store | undefined
afterAll(async () => store?.close())

test('retire and orphan-report: bad input, exit codes, nothing written', {timeout: 300_000}, async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-retire-cli-'))
  store = await openStore(settingsSchema.parse({data_dir: dataDir}))
  await store.migrate()
  await store.tenants.createCompany({id: 'acme', name: 'Acme'})
  await store.tenants.createCompany({id: 'other', name: 'Other'})
  await store.tenants.createDepartment({id: 'empty', company_id: 'acme', name: 'Empty'})
  await store.tenants.createDepartment({id: 'theirs', company_id: 'other', name: 'Theirs'})
  await store.tenants.createDepartment({id: 'sales', company_id: 'acme', name: 'Sales'})
  await store.workers.create({company_id: 'acme', department_id: 'sales', script_name: scriptNameFor('acme', 'sales'), status: 'new'})
  const run = (...args: string[]): Promise<CliResult> =>
    new Promise((resolve) => {
      execFile(
        process.execPath,
        [CLI, ...args, '--data-dir', dataDir],
        {env: {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined}},
        (error, stdout, stderr) => resolve({code: error ? Number(error.code) : 0, stdout, stderr}),
      )
    })
  const oneLine = (result: CliResult, code: number, message: string) => {
    expect(result).toMatchObject({code, stdout: ''})
    expect(result.stderr.trimEnd()).toBe(`error: ${message}`)
  }

  const [jsonDryRun, unknown, otherCompany, noCompany, plan, unpairedReport] = await Promise.all([
    run('retire', 'sales', '--json', '--dry-run'),
    run('retire', 'nope'),
    run('retire', 'theirs', '--company', 'acme'),
    run('retire', 'sales', '--company', 'ghost'),
    run('retire', 'sales', '--dry-run'),
    run('orphan-report'),
  ])
  // --dry-run --json prints the plan as JSON and writes nothing (the plain retire below still finds the department).
  expect(jsonDryRun.code).toBe(0)
  expect(JSON.parse(jsonDryRun.stdout)).toMatchObject({state: 'planned', departmentId: 'sales'})
  oneLine(unknown, 5, 'department nope not found')
  oneLine(otherCompany, 5, 'department theirs not found in company acme')
  oneLine(noCompany, 5, 'company ghost not found')
  expect(plan.code).toBe(0)
  expect(plan.stdout).toContain('dry run: nothing was written and the host was not called')
  expect(plan.stdout).toContain('host steps   retire')
  oneLine(unpairedReport, 6, "cannot list the edge host's scripts: the store is not paired with an edge host (run `edgeworkers host pair`)")
  // Outside a terminal there is nobody to ask: --yes is required, and nothing is written without it.
  oneLine(await run('retire', 'sales'), 2, 'retiring sales is permanent: pass --yes to confirm (no terminal to ask in)')
  expect((await store.tenants.getDepartment('sales'))?.deleted_at).toBeNull()
  expect(await store.audit.list()).toEqual([])

  // In a terminal it asks for the department id: a wrong answer retires nothing, the id retires it.
  const inTerminal = (answer: string): Promise<CliResult> =>
    new Promise((resolve) => {
      const command = [process.execPath, CLI, 'retire', 'empty', '--data-dir', dataDir].map((word) => `'${word}'`).join(' ')
      // util-linux script(1) runs the CLI on a pseudo-terminal; its stdin stays open until the CLI exits.
      const child = spawn('script', ['-qec', command, '/dev/null'], {env: {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined}})
      let stdout = ''
      let answered = false
      // script(1) may exit before its stdin is closed here: a late write's EPIPE is not the test's concern.
      child.stdin.on('error', () => {})
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString()
        if (!answered && stdout.includes('Type empty to confirm: ')) {
          answered = true
          child.stdin.write(`${answer}\n`)
        }
      })
      child.on('close', (code) => {
        child.stdin.destroy()
        resolve({code: code ?? -1, stdout, stderr: ''})
      })
    })
  const refused = await inTerminal('sales')
  expect(refused.code).toBe(2)
  expect(refused.stdout).toContain('This deletes department empty for good; its URL will answer 404. Type empty to confirm: ')
  expect(refused.stdout).toContain('error: not confirmed: nothing was retired')
  expect((await store.tenants.getDepartment('empty'))?.deleted_at).toBeNull()
  const confirmed = await inTerminal('empty')
  expect(confirmed.code).toBe(0)
  expect((await store.tenants.getDepartment('empty'))?.deleted_at).not.toBeNull()

  // Paired with a host nothing answers for: the delete stands, the retirement is pending (7).
  await store.kit.savePairing({
    scope: 'onprem:0123456789ab',
    host_url: 'http://127.0.0.1:9',
    host_fingerprint: 'f'.repeat(64),
    host_public_key: 'unused',
    shared_secret: 'a'.repeat(64),
  })
  await store.tenants.createDepartment({id: 'empty2', company_id: 'acme', name: 'Empty 2'})
  const [pending, empty, report] = await Promise.all([
    run('retire', 'sales', '--json', '--yes'),
    run('retire', 'empty2', '--json', '--yes'),
    run('orphan-report'),
  ])
  expect(pending.code).toBe(7)
  expect(JSON.parse(pending.stdout)).toMatchObject({state: 'pending', code: 'edge_host_unreachable', departmentId: 'sales'})
  expect(empty.code).toBe(0)
  expect(JSON.parse(empty.stdout)).toMatchObject({state: 'no_worker'})
  expect(report.code).toBe(10)
  expect(report.stderr).toMatch(/^error: edge host script listing failed: .*edge host unreachable/)
  const again = await run('retire', 'empty2', '--yes')
  oneLine(again, 5, 'department empty2 is already deleted (it had no Worker to retire)')
})
