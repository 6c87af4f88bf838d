// Local access and redaction (issue #15, findings 3 and 5): under umask 022 the kit's and the
// host's data dirs come out 0700 and every secret-holding file 0600; a secret-holding file found
// open to others is refused with the chmod that fixes it; `config show` never prints a password.
import {chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {runCli, type CliResult} from '../support/cli.js'
import {startTestHost} from '../support/host.js'

const modeOf = (file: string) => (statSync(file).mode & 0o777).toString(8)
let root: string
let previousUmask: number

beforeAll(() => {
  previousUmask = process.umask(0o022) // the CLI children inherit it
  root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-access-'))
})

afterAll(() => {
  process.umask(previousUmask)
  rmSync(root, {recursive: true, force: true})
})

function expectOneLine(result: CliResult, code: number, pattern: RegExp): void {
  expect(result.code).toBe(code)
  expect(result.stderr.trim().split('\n')).toHaveLength(1)
  expect(result.stderr.trim()).toMatch(pattern)
}

describe('the kit', () => {
  test('db migrate creates the data dir 0700 and the store 0600; a store open to others is refused with the fix', async () => {
    const dataDir = path.join(root, 'kit', 'data')
    const migrated = await runCli(['db', 'migrate', '--data-dir', dataDir])
    expect(migrated.code).toBe(0)
    expect(modeOf(dataDir)).toBe('700')
    expect(modeOf(path.join(root, 'kit'))).toBe('700') // created by the same call
    const store = path.join(dataDir, 'edgeworkers.sqlite')
    expect(modeOf(store)).toBe('600')
    for (const companion of ['-wal', '-shm']) if (existsSync(store + companion)) expect(modeOf(store + companion)).toBe('600')

    chmodSync(store, 0o644)
    const refused = await runCli(['company', 'create', 'Acme', '--data-dir', dataDir])
    expectOneLine(
      refused,
      3,
      new RegExp(`^error: ${store} holds secrets but is accessible to other users \\(mode 0644\\); run \`chmod 600 ${store}\` and retry$`),
    )
    chmodSync(store, 0o600)
    chmodSync(dataDir, 0o755)
    const dirRefused = await runCli(['company', 'create', 'Acme', '--data-dir', dataDir])
    expectOneLine(dirRefused, 3, new RegExp(`run \`chmod 700 ${dataDir}\` and retry$`))
    chmodSync(dataDir, 0o700)
    expect((await runCli(['company', 'create', 'Acme', '--data-dir', dataDir])).code).toBe(0)
  }, 60_000)

  test('config show redacts the PostgreSQL password (text and --json); a config file holding it must be private', async () => {
    const dataDir = path.join(root, 'show')
    const env = {EDGEWORKERS_STORE__URL: 'postgres://kit:s3cr3t-pw@db.example:5432/edgeworkers'}
    const text = await runCli(['config', 'show', '--data-dir', dataDir], env)
    const json = await runCli(['config', 'show', '--json', '--data-dir', dataDir], env)
    expect(text.code).toBe(0)
    expect(json.code).toBe(0)
    for (const output of [text.stdout, json.stdout]) {
      expect(output).not.toContain('s3cr3t-pw')
      expect(output).toContain('postgres://kit:[redacted]@db.example:5432/edgeworkers')
    }
    const configFile = path.join(root, 'kit.toml')
    writeFileSync(configFile, `[store]\nurl = "${env.EDGEWORKERS_STORE__URL}"\n`)
    chmodSync(configFile, 0o644)
    expectOneLine(await runCli(['config', 'show', '--config', configFile]), 3, new RegExp(`run \`chmod 600 ${configFile}\``))
    chmodSync(configFile, 0o600)
    const fromFile = await runCli(['config', 'show', '--config', configFile])
    expect(fromFile.code).toBe(0)
    expect(fromFile.stdout).not.toContain('s3cr3t-pw')
  }, 60_000)
})

test('the host creates its data dir 0700 and host.sqlite and identity.key 0600; it refuses a state file open to others', async () => {
  const dataDir = path.join(root, 'host', 'data')
  const host = await startTestHost({dataDir, settings: {shards: 1}})
  try {
    expect(modeOf(dataDir)).toBe('700')
    expect(modeOf(path.join(dataDir, 'host.sqlite'))).toBe('600')
    expect(modeOf(path.join(dataDir, 'identity.key'))).toBe('600')
    expect(modeOf(path.join(dataDir, 'runtime'))).toBe('700')
  } finally {
    await host.stop()
  }
  chmodSync(path.join(dataDir, 'host.sqlite'), 0o644)
  await expect(startTestHost({dataDir, settings: {shards: 1}})).rejects.toThrow(
    /host\.sqlite holds secrets but is accessible to other users \(mode 0644\); run `chmod 600 /,
  )
}, 60_000)
