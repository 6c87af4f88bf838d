// The tenant, inspection and db commands through the real CLI (a child process per command), on a
// temporary data dir: output, --json, exit codes, and bad input writing nothing.
import {existsSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, describe, expect, inject, onTestFinished, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {deterministicId, openStore, scriptNameFor} from '../../src/store/index.js'
import {migrations} from '../../src/store/migrations/index.js'
import {runCli as cli, type CliResult} from '../support/cli.js'

const ALL = Object.keys(migrations)
const PENDING = `${ALL.length} pending migrations: ${ALL.join(', ')}`

// vitest runs from the repository root.
// Each command is a fresh process that loads oclif and transpiles the sources: seconds on a busy machine.
const CLI_TEST_TIMEOUT_MS = 300_000

/** A one-line error on stderr, nothing on stdout. */
function expectOneLineError(result: CliResult, code: number, text: string | RegExp): void {
  expect(result.code).toBe(code)
  expect(result.stdout).toBe('')
  expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
  expect(result.stderr).toMatch(text)
}

describe('edgeworkers CLI on a SQLite data dir', {timeout: CLI_TEST_TIMEOUT_MS}, () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-cli-'))
  afterAll(() => rmSync(dataDir, {recursive: true, force: true}))
  const run = (...args: string[]) => cli([...args, '--data-dir', dataDir])
  const store = () => openStore(settingsSchema.parse({data_dir: dataDir}))

  test('db migrate --check names the pending migration; other commands refuse; db migrate applies it', async () => {
    const [check, checkJson, refused] = await Promise.all([
      run('db', 'migrate', '--check'),
      run('db', 'migrate', '--check', '--json'),
      run('company', 'create', 'Acme'),
    ])
    expectOneLineError(check, 4, `store schema does not match this build (${PENDING}); run \`edgeworkers db migrate\``)
    // --json reports the mismatch on stdout, and the exit code still says it.
    expect(checkJson.code).toBe(4)
    expect(JSON.parse(checkJson.stdout)).toMatchObject({matches: false, applied: [], pending: ALL})
    expectOneLineError(refused, 4, `store ${path.join(dataDir, 'edgeworkers.sqlite')} does not exist; run \`edgeworkers db migrate\``)
    // Neither the check nor the refused command left an empty store behind.
    expect(existsSync(path.join(dataDir, 'edgeworkers.sqlite'))).toBe(false)

    const migrated = await run('db', 'migrate')
    expect(migrated).toMatchObject({code: 0, stdout: `applied ${ALL.length} migrations to ${path.join(dataDir, 'edgeworkers.sqlite')}: ${ALL.join(', ')}\n`})
    const checked = await run('db', 'migrate', '--check', '--json')
    expect(checked.code).toBe(0)
    expect(JSON.parse(checked.stdout)).toMatchObject({matches: true, applied: ALL, pending: [], unknown: []})
  })

  test('company and department create, with bad input refused and nothing written', async () => {
    const company = await run('company', 'create', 'Acme Corp', '--id', 'acme', '--json')
    expect(company.code).toBe(0)
    expect(JSON.parse(company.stdout)).toMatchObject({id: 'acme', name: 'Acme Corp'})

    const [badId, duplicateAccounts] = await Promise.all([
      run('company', 'create', 'Bad', '--id', 'bad:id'),
      run('department', 'create', 'acme', 'Ops', '--id', 'acme-ops', '--service-account', 'ci', '--service-account', 'ci'),
    ])
    expectOneLineError(badId, 2, 'company id "bad:id" is invalid')
    expectOneLineError(duplicateAccounts, 6, 'service account ci already exists in department acme-ops')

    const department = await run('department', 'create', 'acme', 'Sales', '--id', 'acme-sales', '--service-account', 'ci')
    expect(department.code).toBe(0)
    expect(department.stdout).toMatch(/^created department acme-sales \(Sales\) in company acme\ncreated service account ci \(/)

    const s = await store()
    try {
      expect(await s.tenants.getCompany('bad:id')).toBeUndefined()
      // The department whose second service account failed was rolled back with it.
      expect(await s.tenants.getDepartment('acme-ops')).toBeUndefined()
      expect((await s.tenants.listServiceAccounts('acme-sales')).map((account) => account.name)).toEqual(['ci'])
    } finally {
      await s.close()
    }
  })

  test('worker, outbox and audit inspection, with filters, --json and not-found exits', async () => {
    const scriptName = scriptNameFor('acme', 'acme-sales')
    const s = await store()
    let outboxId: string
    try {
      const worker = await s.workers.create({id: 'w-acme-sales', company_id: 'acme', department_id: 'acme-sales', script_name: scriptName, status: 'active'})
      await s.workers.createVersion({
        id: 'v-1',
        worker_id: worker.id,
        release_generation: 'rg-1',
        builder_policy: 'department-worker-project-v2.9',
        project_artifact_key: 'sha256/p',
        project_digest: 'p'.repeat(64),
        bundle_artifact_key: 'sha256/b',
        bundle_digest: 'b'.repeat(64),
        manifest: {},
        receipt: {},
      })
      outboxId = (
        await s.outbox.enqueue({
          operation: 'deploy',
          dedupe_key: 'deploy:w-acme-sales:v-1:0',
          dispatch_namespace: 'onprem:0123456789ab',
          worker_id: worker.id,
          script_name: scriptName,
          payload: {version_id: 'v-1'},
          last_error_code: 'edge_host_fenced',
        })
      ).row.id
      await s.audit.append({
        id: deterministicId('department.worker_retired', worker.id),
        action: 'department.worker_retired',
        resource_type: 'edge_worker',
        resource_id: worker.id,
        actor_type: 'system',
        actor_id: '',
        auth_method: 'system',
        result: 'success',
        facts: {},
      })
    } finally {
      await s.close()
    }

    const [shown, listed, fenced, outboxRow, audit, missingWorker, badStatus] = await Promise.all([
      run('worker', 'show', scriptName, '--json'),
      run('worker', 'list', '--company', 'acme'),
      run('outbox', 'list', '--operation', 'deploy', '--error-code', 'edge_host_fenced', '--json'),
      run('outbox', 'show', outboxId),
      run('audit', 'list', '--action', 'department.worker_retired', '--json'),
      run('worker', 'show', 'nope'),
      run('outbox', 'list', '--status', 'bogus'),
    ])
    expect(shown.code).toBe(0)
    expect(JSON.parse(shown.stdout)).toMatchObject({worker: {id: 'w-acme-sales', script_name: scriptName}, versions: [{id: 'v-1', state: 'built'}]})
    expect(listed.stdout).toMatch(
      new RegExp(`^ID +SCRIPT +COMPANY +DEPARTMENT +STATUS +CURRENT VERSION\\nw-acme-sales +${scriptName} +acme +acme-sales +active +-\\n$`),
    )
    expect(JSON.parse(fenced.stdout)).toMatchObject([{id: outboxId, status: 'pending', payload: {version_id: 'v-1'}}])
    expect(outboxRow.stdout).toContain(`last error code: edge_host_fenced`)
    expect(JSON.parse(audit.stdout)).toMatchObject([{action: 'department.worker_retired', resource_id: 'w-acme-sales'}])
    expectOneLineError(missingWorker, 5, 'Worker nope not found')
    expectOneLineError(badStatus, 2, 'Expected --status=bogus to be one of')
  })

  test('company purge needs --yes, deletes the tenant tree and keeps outbox and audit rows', async () => {
    expectOneLineError(await run('company', 'purge', 'acme'), 2, 'add --yes to confirm')
    const purged = await run('company', 'purge', 'acme', '--yes', '--json')
    expect(purged.code).toBe(0)
    expect(JSON.parse(purged.stdout)).toEqual({company_id: 'acme', deleted: {departments: 1, service_accounts: 1, workers: 1, versions: 1}})

    const [workers, outbox] = await Promise.all([run('worker', 'list', '--json'), run('outbox', 'list', '--json')])
    expect(JSON.parse(workers.stdout)).toEqual([])
    expect(JSON.parse(outbox.stdout)).toHaveLength(1)
  })
})

describe('edgeworkers CLI on PostgreSQL', {timeout: CLI_TEST_TIMEOUT_MS}, () => {
  test('db migrate --check and db migrate against a fresh database', async () => {
    const admin = inject('pgAdminUrl')
    const name = `ew_cli_${Date.now().toString(36)}`
    const {default: pg} = await import('pg')
    const client = new pg.Client({connectionString: admin})
    await client.connect()
    await client.query(`create database ${name}`)
    try {
      const url = new URL(admin)
      url.pathname = `/${name}`
      const env = {EDGEWORKERS_STORE__URL: url.toString()}
      const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-cli-pg-'))
      onTestFinished(() => rmSync(dataDir, {recursive: true, force: true}))
      expectOneLineError(await cli(['db', 'migrate', '--check', '--data-dir', dataDir], env), 4, PENDING)
      const migrated = await cli(['db', 'migrate', '--json', '--data-dir', dataDir], env)
      expect(migrated.code).toBe(0)
      expect(JSON.parse(migrated.stdout)).toEqual({location: url.toString().replace(':postgres@', '@'), applied: ALL})
    } finally {
      await client.query(`drop database if exists ${name} with (force)`)
      await client.end()
    }
  })

  test('a server that refuses is one line, exit 4, without the password', async () => {
    const refused = await cli(['worker', 'list', '--data-dir', tmpdir()], {EDGEWORKERS_STORE__URL: 'postgres://kit:s3cret-pw@127.0.0.1:1/kit'})
    expectOneLineError(refused, 4, 'PostgreSQL store postgres://kit@127.0.0.1:1/kit is unavailable: connect ECONNREFUSED 127.0.0.1:1')
    expect(refused.stderr).not.toContain('s3cret-pw')
  })
})
