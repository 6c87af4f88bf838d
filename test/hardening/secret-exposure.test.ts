// A planted secret stays where it must be (issue #29, hole 1). Under umask 022, a real `host serve`
// process and the CLI: a Worker that logs its secret is deployed, gets the secret by `secret put`,
// serves requests, is tailed, backed up and restored. Then every file under the kit's data dir, the
// host's data dir, the backup and the restored host dir is read byte for byte, and every output
// stream (each CLI run's stdout and stderr, the tail's, the host process's): the value is found only
// in host.sqlite (the kit's store never holds it: the outbox and the audit keep digests) and in the
// backup's copy of it, each 0600; and every file and directory there is 0600 / 0700. Once with the
// kit's SQLite store (a file in its data dir, searched with the rest) and once with a PostgreSQL
// store, whose every table is dumped and searched too (outbox payloads, audit rows, …).
import {randomUUID} from 'node:crypto'
import {lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import pg from 'pg'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {runCli, type CliResult} from '../support/cli.js'
import {spawnCli, type WatchedProcess} from '../support/process.js'
import {describeStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const SECRET = `Planted-${randomUUID()}`
let root: string
let previousUmask: number
let host: WatchedProcess | undefined

beforeAll(() => {
  previousUmask = process.umask(0o022) // the CLI and host processes inherit it
  root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-exposure-'))
})

afterAll(async () => {
  process.umask(previousUmask)
  if (host && host.child.exitCode === null && host.child.signalCode === null) {
    host.child.kill('SIGKILL')
    await host.exited
  }
  rmSync(root, {recursive: true, force: true})
})

/** Every path under `dir` (itself included) whose mode is not the owner's alone: files 0600, directories 0700, sockets no group/other bits. */
function openModes(dir: string): string[] {
  const found: string[] = []
  const visit = (target: string) => {
    const stat = lstatSync(target)
    const mode = stat.mode & 0o777
    if (stat.isDirectory()) {
      if (mode !== 0o700) found.push(`${target} ${mode.toString(8)}`)
      for (const entry of readdirSync(target)) visit(path.join(target, entry))
    } else if (stat.isFile()) {
      if (mode !== 0o600) found.push(`${target} ${mode.toString(8)}`)
    } else if (stat.isSocket()) {
      if ((mode & 0o077) !== 0) found.push(`${target} ${mode.toString(8)}`)
    } else found.push(`${target} is neither a file, a directory nor a socket`)
  }
  visit(dir)
  return found
}

/** The regular files under `dir` whose bytes contain `needle`. */
function filesHolding(dir: string, needle: Buffer): string[] {
  const entries = readdirSync(dir, {withFileTypes: true, recursive: true})
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name))
    .filter((file) => readFileSync(file).includes(needle))
}

/** Every row of every table of a PostgreSQL database, as JSON text. */
async function dumpTables(url: string): Promise<Record<string, string>> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    const tables = (await client.query<{name: string}>(`select tablename as name from pg_tables where schemaname = 'public'`)).rows.map((row) => row.name)
    const dump: Record<string, string> = {}
    for (const table of tables) dump[table] = JSON.stringify((await client.query(`select * from "${table}"`)).rows)
    return dump
  } finally {
    await client.end()
  }
}

test('a secret a Worker logs is found only in host.sqlite, every created file is 0600 and every directory 0700 (SQLite store)', {
  timeout: 300_000,
}, async () => {
  await plantAndSearch('sqlite', {})
})

describeStore('postgres', 'a planted secret', (t) => {
  test('a secret a Worker logs is found only in host.sqlite, not in any table of the PostgreSQL store; every created file 0600, directory 0700', {
    timeout: 300_000,
  }, async () => {
    await plantAndSearch('postgres', {EDGEWORKERS_STORE__URL: t.url})
    const dump = await dumpTables(t.url)
    // The store did hold the work: the outbox rows and the audit of the secret put.
    expect(dump.edge_worker_outbox).toContain('secrets.put')
    expect(dump.edge_worker_audit_logs).toContain('secrets.put')
    expect(
      Object.entries(dump)
        .filter(([, rows]) => rows.includes(SECRET))
        .map(([table]) => table),
    ).toEqual([])
  })
})

/**
 * The run under `label` (its own dirs), with `storeEnv` given to every kit command (none: the
 * default SQLite store in the kit's data dir), and the search of every file and stream.
 */
async function plantAndSearch(label: string, storeEnv: Record<string, string>): Promise<void> {
  const kitDir = path.join(root, label, 'kit')
  const hostDir = path.join(root, label, 'host')
  const backupDir = path.join(root, label, 'backup')
  const restoredHostDir = path.join(root, label, 'host-restored')
  const inputDir = path.join(root, label, 'input') // the operator's own file with the value: not searched
  mkdirSync(inputDir, {recursive: true})
  const secretFile = path.join(inputDir, 'token.txt')
  writeFileSync(secretFile, SECRET)

  host = spawnCli(['host', 'serve', '--data-dir', hostDir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
    EDGEWORKERS_HOST__SHARDS: '1',
    EDGEWORKERS_HOST__WORKER_LOG_FILE: path.join(hostDir, 'logs', 'workers.log'),
  })
  await host.waitFor(({stdout, stderr}) => stdout.includes('edge host started') && stderr.includes('pairing code:'), 'the host to start')
  const started = host.stdout
    .split('\n')
    .map((line) => (line.startsWith('{') ? (JSON.parse(line) as {msg?: string; adminUrl?: string}) : {}))
    .find((entry) => entry.msg === 'edge host started')!
  const code = /pairing code: (\S+)/.exec(host.stderr)![1]!

  const runs: CliResult[] = []
  const kit = async (args: string[], expectedCode = 0) => {
    const result = await runCli(args, {EDGEWORKERS_DATA_DIR: kitDir, ...storeEnv})
    runs.push(result)
    expect({args, code: result.code, stderr: result.stderr}).toEqual({args, code: expectedCode, stderr: expect.any(String)})
    return result
  }
  await kit(['db', 'migrate'])
  await kit(['host', 'pair', started.adminUrl!, '--code', code])
  await kit(['company', 'create', 'Acme', '--id', 'acme'])
  await kit(['department', 'create', 'acme', 'Sales', '--id', 'acme-sales'])
  await kit(['deploy', path.join(FIXTURES_DIR, 'tail-logger'), '--department', 'acme-sales'])
  await kit(['secret', 'put', 'acme-sales', 'TOKEN', '--from-file', secretFile])
  const url = (JSON.parse((await kit(['worker', 'show', 'acme-sales', '--json'])).stdout) as {url: string}).url

  // The Worker logs `token <value>` (the fixture's /secret) once its shard restarted with the secret.
  const tail = spawnCli(['tail', 'acme-sales'], {EDGEWORKERS_DATA_DIR: kitDir, ...storeEnv})
  await tail.waitFor(({stderr}) => stderr.includes('tailing'), 'the tail to open')
  const logged = () => tail.stdout.includes('token [redacted]') && host!.stdout.includes('"msg":"token [redacted]"')
  for (let sent = 0; !logged(); sent++) {
    if (sent > 100) throw new Error(`the Worker never logged its secret; host: ${host.stdout.slice(-2000)}`)
    await fetch(`${url}secret`).then((response) => response.text())
    await tail.waitFor(logged, 'the logged line', 1_000).catch(() => {})
  }
  expect(openModes(kitDir)).toEqual([])
  expect(openModes(hostDir)).toEqual([]) // sockets included, while the host runs
  tail.child.kill('SIGINT')
  await tail.exited

  await kit(['backup', 'create', backupDir])
  // The host was restored into a new data dir, not started: the verification is left to a pass (7).
  await kit(['backup', 'restore', backupDir, '--host-data-dir', restoredHostDir], 7)
  host.child.kill('SIGTERM')
  await host.exited

  const needle = Buffer.from(SECRET)
  const streams = [...runs.flatMap((run) => [run.stdout, run.stderr]), tail.stdout, tail.stderr, host.stdout, host.stderr]
  expect(streams.filter((text) => text.includes(SECRET))).toEqual([])
  expect(filesHolding(kitDir, needle)).toEqual([])
  expect(filesHolding(hostDir, needle)).toEqual([path.join(hostDir, 'host.sqlite')])
  expect(filesHolding(restoredHostDir, needle)).toEqual([path.join(restoredHostDir, 'host.sqlite')])
  // The backup's host snapshot is an uncompressed tar of the host's data dir: its host.sqlite.
  expect(filesHolding(backupDir, needle)).toEqual([path.join(backupDir, 'host', 'snapshot.tar')])
  for (const dir of [kitDir, hostDir, restoredHostDir, backupDir]) expect(openModes(dir)).toEqual([])
  expect(readFileSync(path.join(hostDir, 'logs', 'workers.log'), 'utf8')).toContain('token [redacted]')
}
