// D1 databases (wrangler's d1_databases) against a real edge host running real workerd, under both
// host.code_loading modes: every operation answered as miniflare answers the same Worker (the
// oracle: same request sequence, answers compared as data), a database reachable only by its own
// Worker, data kept across a redeploy, a host restart and a host snapshot restored into a fresh host,
// `d1 execute` and `d1 migrations apply`, and bad d1_databases refused in one line.
import {mkdirSync, readdirSync, statSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import {Miniflare} from 'miniflare'
import {request} from 'undici'
import {beforeAll, describe, expect, test} from 'vitest'
import {extractSnapshot, readSnapshotManifest} from '../../src/engine/backup/host-snapshot.js'
import {expectDeployRefusals} from '../support/cli.js'
import {startTestHost} from '../support/host.js'
import {kitWithHost} from '../support/cli-kit.js'
import {D1_STEPS, D1_WORKER, type D1Step} from './d1-worker-fixture.js'

const COMPATIBILITY_DATE = '2025-06-01'
const DATABASE_ID = 'a6e3c2f0-5b1d-4c8e-9f7a-2d4b6e8c0a1f'
let oracleAnswers: unknown[]

beforeAll(async () => {
  const oracle = new Miniflare({modules: true, script: D1_WORKER, d1Databases: {DB: DATABASE_ID, OTHER: 'other'}, compatibilityDate: COMPATIBILITY_DATE})
  try {
    oracleAnswers = []
    for (const step of D1_STEPS) {
      const response = await oracle.dispatchFetch('http://oracle/', {method: 'POST', body: JSON.stringify(step)})
      oracleAnswers.push(comparable(await response.json()))
    }
  } finally {
    await oracle.dispose()
  }
}, 120_000)

/** Answers as data to compare: timings and the name of the store that served them are each store's own. */
function comparable(answer: unknown): unknown {
  return JSON.parse(JSON.stringify(answer), (key, value) => {
    if (key === 'duration' && typeof value === 'number') return 'a duration'
    if (key === 'served_by' && typeof value === 'string') return 'a store'
    return value
  })
}

function wranglerToml(name: string, extra: string[] = []): string {
  return [
    `name = "${name}"`,
    'main = "worker.js"',
    `compatibility_date = "${COMPATIBILITY_DATE}"`,
    ...extra,
    '[[d1_databases]]',
    'binding = "DB"',
    'database_name = "app"',
    `database_id = "${DATABASE_ID}"`,
    'preview_database_id = "ignored-on-prem"',
    'migrations_dir = "db/migrations"',
    '[[d1_databases]]',
    'binding = "OTHER"',
    'database_name = "other"',
  ].join('\n')
}

describe.each(['restart', 'loader'] as const)('code_loading = %s', (codeLoading) => {
  const kit = kitWithHost(`d1-${codeLoading}`, {settings: {shards: 1, code_loading: codeLoading}})
  const {cli, project, deploy} = kit

  async function run(url: string, step: D1Step): Promise<unknown> {
    const response = await request(url, {method: 'POST', body: JSON.stringify(step)})
    expect(response.statusCode, JSON.stringify(step).slice(0, 200)).toBe(200)
    return response.body.json()
  }
  const names = async (url: string, binding = 'DB') =>
    run(url, {binding, op: 'raw', sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%' ORDER BY name"})

  test('every operation answers as miniflare answers the same Worker', {timeout: 240_000}, async () => {
    const dir = project('ops', {'wrangler.toml': wranglerToml('ops'), 'worker.js': D1_WORKER})
    const plan = await cli('deploy', dir, '--dry-run', '--json')
    expect(JSON.parse(plan.stdout).bindings.d1Databases).toEqual([
      {binding: 'DB', id: DATABASE_ID},
      {binding: 'OTHER', id: 'other'},
    ])
    const {url, script} = await deploy(dir)
    const answers: unknown[] = []
    for (const step of D1_STEPS) answers.push(comparable(await run(url, step)))
    // Step by step, so a difference names its step.
    expect(D1_STEPS.map((step, index) => ({step, answer: answers[index]}))).toEqual(D1_STEPS.map((step, index) => ({step, answer: oracleAnswers[index]})))

    // A read is not a write: plain reads leave the database's files as they were (workerd's local
    // bookmark, which a withSession() call asks for, is a row written in the database).
    const before = databaseFiles(kit.host.dataDir, script)
    for (const op of ['first', 'all', 'raw'] as const) await run(url, {op, sql: 'SELECT name FROM users WHERE id = ?', params: [1]})
    expect(databaseFiles(kit.host.dataDir, script)).toEqual(before)

    // Thousands of queries one after another in one request: binding calls never leave workerd, and
    // the shard still answers the host's health probe meanwhile, so it is not taken for stalled.
    const times = 5000
    expect(await run(url, {op: 'repeat', times, sql: 'SELECT name FROM users WHERE id = ?', params: [1]})).toEqual({result: {row: {name: 'ada'}, times}})
  })

  test("a database is its Worker's own; data outlives a redeploy, a host restart and retirement", {timeout: 240_000}, async () => {
    const owner = await deploy(project('owner', {'wrangler.toml': wranglerToml('owner'), 'worker.js': D1_WORKER}))
    await run(owner.url, {op: 'exec', sql: 'CREATE TABLE kept (value TEXT)'})
    await run(owner.url, {op: 'run', sql: 'INSERT INTO kept VALUES (?)', params: ['across everything']})
    await run(owner.url, {binding: 'OTHER', op: 'exec', sql: 'CREATE TABLE other_kept (value TEXT)'})

    // Another department's Worker naming the same database id has a database of its own.
    const stranger = await deploy(project('stranger', {'wrangler.toml': wranglerToml('stranger'), 'worker.js': D1_WORKER}))
    expect(await names(stranger.url)).toEqual({result: []})
    expect(await run(stranger.url, {op: 'all', sql: 'SELECT * FROM kept'})).toEqual({
      error: 'Error: D1_ERROR: no such table: kept: SQLITE_ERROR',
      cause: 'Error: no such table: kept: SQLITE_ERROR',
    })

    // A new version of the Worker reads the same data.
    const changed = project('owner-v2', {'wrangler.toml': wranglerToml('owner', ['[vars]', 'VERSION = "2"']), 'worker.js': D1_WORKER})
    expect((await deploy(changed, owner.department)).url).toBe(owner.url)
    expect(await run(owner.url, {op: 'first', sql: 'SELECT value FROM kept', column: 'value'})).toEqual({result: 'across everything'})

    await kit.host.restart()
    expect(await run(owner.url, {op: 'raw', sql: 'SELECT value FROM kept'})).toEqual({result: [['across everything']]})
    // Cloudflare serves dump() for its alpha databases only; the host, for none.
    expect(await run(owner.url, {op: 'dump'})).toMatchObject({error: expect.stringContaining('D1_DUMP_ERROR')})
    expect(await names(owner.url, 'OTHER')).toEqual({result: [['other_kept']]})

    // Retired: the Worker no longer answers, and its database files stay on the host's disk.
    const retired = await cli('retire', owner.department, '--yes', '--json')
    expect(retired.code, retired.stderr).toBe(0)
    expect((await request(owner.url, {method: 'POST', body: '{}'})).statusCode).toBe(404)
    expect(tablesOnDisk(kit.host.dataDir, owner.script)).toEqual(['kept', 'other_kept'])
  })

  test('a host snapshot restored into a fresh host brings the D1 data back', {timeout: 240_000}, async () => {
    const {url, script} = await deploy(project('snapshot', {'wrangler.toml': wranglerToml('snapshot'), 'worker.js': D1_WORKER}))
    await run(url, {op: 'exec', sql: 'CREATE TABLE saved (value TEXT)'})
    await run(url, {op: 'run', sql: 'INSERT INTO saved VALUES (?)', params: ['in the snapshot']})
    const backupDir = path.join(kit.root, 'backup')
    const backup = await cli('backup', 'create', backupDir, '--json')
    expect({code: backup.code, stderr: backup.stderr}).toEqual({code: 0, stderr: expect.any(String)})
    const hostSnapshot = findFile(backupDir, (file) => file.endsWith('.tar'))
    const manifest = await readSnapshotManifest(hostSnapshot)
    expect(manifest.files.some((file) => file.path.startsWith(`do/${script}/${script}:d1-databases/`))).toBe(true)
    const restoredDir = path.join(kit.root, 'restored-host')
    mkdirSync(restoredDir, {mode: 0o700})
    await extractSnapshot(hostSnapshot, restoredDir, manifest)
    const restored = await startTestHost({dataDir: restoredDir, settings: {shards: 1, code_loading: codeLoading}})
    try {
      expect(await run(`${restored.publicUrl}/${script}/`, {op: 'raw', sql: 'SELECT value FROM saved'})).toEqual({result: [['in the snapshot']]})
    } finally {
      await restored.stop()
    }
  })

  test("d1 execute and d1 migrations apply run on the Worker's own database, each in one transaction", {timeout: 240_000}, async () => {
    const dir = project('cli', {
      'wrangler.toml': wranglerToml('cli'),
      'worker.js': D1_WORKER,
      'db/migrations/0001_init.sql':
        'CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n-- a comment\nCREATE INDEX items_name ON items (name);\n',
      'db/migrations/0002_seed.sql': "INSERT INTO items (name) VALUES ('first');\nINSERT INTO items (name) VALUES ('second');\n",
    })
    const {url, department} = await deploy(dir)
    const migrations = path.join(dir, 'db/migrations')
    const json = async (...args: string[]) => {
      const result = await cli(...args, '--json')
      expect({code: result.code, stderr: result.stderr}).toEqual({code: 0, stderr: expect.any(String)})
      return JSON.parse(result.stdout) as Record<string, unknown>
    }
    const rowsOf = async (sql: string, binding = 'DB') => {
      const answer = (await json('d1', 'execute', department, binding, '--command', sql)) as {results: Array<{columns: string[]; rows: unknown[][]}>}
      return answer.results[0]!.rows
    }

    // Without --dir: the binding's migrations_dir in the deployed wrangler config, under --project.
    expect(await json('d1', 'migrations', 'apply', department, 'DB', '--project', dir)).toMatchObject({
      dir: migrations,
      applied: ['0001_init.sql', '0002_seed.sql'],
      alreadyApplied: [],
    })
    expect(await json('d1', 'migrations', 'apply', department, 'DB', '--dir', migrations)).toMatchObject({
      applied: [],
      alreadyApplied: ['0001_init.sql', '0002_seed.sql'],
    })
    // The Worker sees what the migrations made, and the CLI what the Worker writes.
    expect(await run(url, {op: 'raw', sql: 'SELECT name FROM items ORDER BY id'})).toEqual({result: [['first'], ['second']]})
    await run(url, {op: 'run', sql: 'INSERT INTO items (name) VALUES (?)', params: ['from the worker']})
    expect(await rowsOf('SELECT name FROM d1_migrations ORDER BY id')).toEqual([['0001_init.sql'], ['0002_seed.sql']])
    const execution = await json('d1', 'execute', department, 'DB', '--command', 'SELECT id, name FROM items WHERE id = 3')
    expect(execution).toEqual({
      department,
      binding: 'DB',
      results: [
        {
          columns: ['id', 'name'],
          rows: [[3, 'from the worker']],
          meta: expect.objectContaining({changes: 0, rows_read: 1, rows_written: 0, changed_db: false, served_by: expect.any(String)}),
        },
      ],
    })
    expect(await rowsOf("SELECT count(*) FROM sqlite_master WHERE name = 'items'", 'OTHER')).toEqual([[0]])

    // A failing file or migration applies nothing of itself, and says D1's words.
    writeFileSync(path.join(dir, 'bad.sql'), "INSERT INTO items (name) VALUES ('lost');\nINSERT INTO nowhere VALUES (1);\n")
    const failed = await cli('d1', 'execute', department, 'DB', '--file', path.join(dir, 'bad.sql'))
    expect({code: failed.code, lines: failed.stderr.trim().split('\n').length}).toEqual({code: 8, lines: 1})
    expect(failed.stderr).toContain('D1_ERROR: no such table: nowhere')
    writeFileSync(path.join(migrations, '0003_broken.sql'), "INSERT INTO items (name) VALUES ('lost');\nSELEKT;\n")
    const broken = await cli('d1', 'migrations', 'apply', department, 'DB', '--dir', migrations)
    expect({code: broken.code, lines: broken.stderr.trim().split('\n').length}).toEqual({code: 8, lines: 1})
    expect(broken.stderr).toContain('migration 0003_broken.sql failed')
    expect(await rowsOf('SELECT count(*) FROM items')).toEqual([[3]])
    expect(await rowsOf('SELECT count(*) FROM d1_migrations')).toEqual([[2]])

    // Bad input is refused in one line before the host is asked.
    const refusals: Array<[string[], number, string]> = [
      [['d1', 'execute', department, 'NOPE', '--command', 'SELECT 1'], 5, 'has no D1 database bound as NOPE'],
      [['d1', 'execute', department, 'not an identifier', '--command', 'SELECT 1'], 2, 'must be an identifier'],
      [['d1', 'execute', department, 'DB', '--command', 'SELECT 1', '--file', 'x.sql'], 2, '--file'],
      [['d1', 'execute', department, 'DB', '--command', '  '], 2, 'the SQL is empty'],
      [['d1', 'migrations', 'apply', department, 'DB', '--dir', path.join(dir, 'none')], 2, 'does not exist'],
      [['d1', 'execute', 'no-such-department', 'DB', '--command', 'SELECT 1'], 5, 'not found'],
    ]
    for (const [args, code, message] of refusals) {
      const result = await cli(...args)
      expect({args, code: result.code, lines: result.stderr.trim().split('\n').length}).toEqual({args, code, lines: 1})
      expect(result.stderr).toContain(message)
    }
  })

  // Refused at build, before the host is asked: one code-loading mode is enough.
  if (codeLoading === 'restart')
    test('bad d1_databases are refused in one line, exit 2, nothing deployed', async () => {
      const department = await kit.newDepartment()
      const toml = (...lines: string[]) => ['name = "x"', 'main = "worker.js"', 'compatibility_date = "2025-06-01"', ...lines].join('\n')
      const refusals: Array<[string, Record<string, string>, string]> = [
        [
          'bad-binding',
          {'wrangler.toml': toml('[[d1_databases]]', 'binding = "not an identifier"', 'database_id = "a"')},
          'wrangler.toml: key "d1_databases[0].binding" must be an identifier',
        ],
        [
          'bad-id',
          {'wrangler.toml': toml('[[d1_databases]]', 'binding = "DB"', 'database_id = "has space"')},
          'wrangler.toml: key "d1_databases[0].database_id" must be 1–128 printable ASCII characters without spaces',
        ],
        [
          'twice',
          {'wrangler.toml': toml('[[d1_databases]]', 'binding = "DB"', '[[d1_databases]]', 'binding = "DB"', 'database_name = "b"')},
          'wrangler.toml: key "d1_databases" binds "DB" more than once',
        ],
        [
          'taken',
          {
            'edgeworker.json': JSON.stringify({
              name: 'x',
              main: 'worker.js',
              modules: ['worker.js'],
              compatibilityDate: '2025-06-01',
              builderPolicy: 'department-worker-project-v2.9',
              kvNamespaces: [{binding: 'DB', id: 'a'}],
              d1Databases: [{binding: 'DB'}],
            }),
          },
          'key "d1Databases[0].binding": the binding name "DB" is already taken by kvNamespaces[0].binding',
        ],
      ]
      await expectDeployRefusals(
        cli,
        department,
        refusals.map(([name, files, message]) => ({name, dir: project(name, {...files, 'worker.js': D1_WORKER}), message})),
      )
      const workers = await cli('worker', 'list', '--json')
      expect((JSON.parse(workers.stdout) as Array<{department_id: string}>).map((worker) => worker.department_id)).not.toContain(department)
    })
})

/** The user tables in the Worker's D1 files, sorted. */
function tablesOnDisk(hostDataDir: string, script: string): string[] {
  const dir = path.join(hostDataDir, 'do', script, `${script}:d1-databases`)
  const tables: string[] = []
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.sqlite') && name !== 'metadata.sqlite')) {
    const db = new Database(path.join(dir, file), {readonly: true})
    try {
      const rows = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%'").all() as Array<{name: string}>
      tables.push(...rows.map((row) => row.name))
    } finally {
      db.close()
    }
  }
  return tables.sort()
}

/** Size and modification time of each of the Worker's D1 files (SQLite's -shm, which readers write, aside). */
function databaseFiles(hostDataDir: string, script: string): Record<string, string> {
  const dir = path.join(hostDataDir, 'do', script, `${script}:d1-databases`)
  const files: Record<string, string> = {}
  for (const file of readdirSync(dir).filter((name) => !name.endsWith('-shm'))) {
    const stat = statSync(path.join(dir, file))
    files[file] = `${stat.size} bytes, modified ${stat.mtimeMs}`
  }
  return files
}

function findFile(dir: string, matches: (file: string) => boolean): string {
  for (const entry of readdirSync(dir, {withFileTypes: true, recursive: true})) {
    const file = path.join(entry.parentPath, entry.name)
    if (entry.isFile() && matches(file)) return file
  }
  throw new Error(`no such file under ${dir}`)
}
