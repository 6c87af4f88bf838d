// Runs a command against PostgreSQL through pgbouncer in transaction mode: starts an embedded
// PostgreSQL and a pgbouncer (Debian's `pgbouncer` package) in front of it, runs the command with
// EDGEWORKERS_TEST_PG_URL pointing at pgbouncer (the test suite then creates and uses every database
// through it), and exits with the command's code. pgbouncer refuses to run as root: as root it is
// started with `-u nobody`.
//
//   node --import tsx scripts/with-pgbouncer.ts npx vitest run test/store test/engine/pass
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import net from 'node:net'
import {tmpdir} from 'node:os'
import path from 'node:path'
import pg from 'pg'
import {postgresServer} from '../bench/support/store-baseline.js'

const command = process.argv.slice(2)
if (command.length === 0) {
  console.error('usage: node --import tsx scripts/with-pgbouncer.ts <command> [args…]')
  process.exit(2)
}

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const {port} = server.address() as net.AddressInfo
  server.close()
  return port
}

/** pgbouncer accepts connections a moment after it starts. */
async function waitForPgbouncer(url: string): Promise<void> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const client = new pg.Client({connectionString: url})
    try {
      await client.connect()
      await client.query('select 1')
      return
    } catch (error) {
      if (Date.now() > deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, 200))
    } finally {
      await client.end().catch(() => {})
    }
  }
}

// The suite's own server settings (test/support/global-setup.ts): many connections, durable commits.
const postgres = await postgresServer({flags: ['max_connections=300']})
const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-pgbouncer-'))
chmodSync(dir, 0o755)
const port = await freePort()
const server = new URL(postgres.adminUrl)
writeFileSync(path.join(dir, 'userlist.txt'), `"${server.username}" "${server.password}"\n`)
writeFileSync(
  path.join(dir, 'pgbouncer.ini'),
  [
    '[databases]',
    // Every database name (the suite creates one per test file) goes to the embedded server.
    `* = host=127.0.0.1 port=${server.port}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = plain',
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    'pool_mode = transaction',
    'max_client_conn = 2000',
    // Below the server's max_connections (300), above what one test file uses at once.
    'default_pool_size = 40',
    'max_db_connections = 250',
    // `options` (a client's `-c name=value`) cannot be kept per transaction: pgbouncer drops it.
    'ignore_startup_parameters = extra_float_digits,options',
    // The suite drops each database with its connections: pgbouncer's notes on those are noise.
    'log_connections = 0',
    'log_disconnections = 0',
    `logfile = ${path.join(dir, 'pgbouncer.log')}`,
    '',
  ].join('\n'),
)
writeFileSync(path.join(dir, 'pgbouncer.log'), '')
// Readable by `nobody` (below); the log writable by it.
for (const file of ['userlist.txt', 'pgbouncer.ini']) chmodSync(path.join(dir, file), 0o644)
chmodSync(path.join(dir, 'pgbouncer.log'), 0o666)
const bouncer = spawn('pgbouncer', [...(process.getuid?.() === 0 ? ['-u', 'nobody'] : []), path.join(dir, 'pgbouncer.ini')], {
  stdio: ['ignore', 'ignore', 'inherit'],
})
let code = 1
try {
  const url = `postgres://${server.username}:${server.password}@127.0.0.1:${port}/postgres`
  await waitForPgbouncer(url)
  const child = spawn(command[0]!, command.slice(1), {stdio: 'inherit', env: {...process.env, EDGEWORKERS_TEST_PG_URL: url}})
  const [exitCode] = (await once(child, 'exit')) as [number | null]
  code = exitCode ?? 1
  if (code !== 0) console.error(`pgbouncer's log:\n${readFileSync(path.join(dir, 'pgbouncer.log'), 'utf8')}`)
} finally {
  bouncer.kill('SIGTERM')
  if (bouncer.exitCode === null) await once(bouncer, 'exit')
  await postgres.stop()
  rmSync(dir, {recursive: true, force: true})
}
process.exit(code)
