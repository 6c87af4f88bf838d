// The real CLI: `edgeworkers host serve` as a subprocess — addresses in host.json, JSON logs, the
// pairing code printed once (and again by `host pairing-code`), serving, and a clean SIGTERM.
import {execFile, spawn, type ChildProcess} from 'node:child_process'
import {existsSync, mkdtempSync, readdirSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {promisify} from 'node:util'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {readHostInfo, type HostInfo} from '../../src/edge-host/host.js'
import {paths} from '../support/paths.js'
import {HostClient} from '../support/host.js'
import {fixtureUpload, scriptNameFor} from '../support/worker-fixtures.js'
import {CLI_BIN as CLI} from '../support/cli.js'

const ROOT = path.resolve(import.meta.dirname, '../..')
const env = {...process.env, EDGEWORKERS_HOST__SHARDS: '1', EDGEWORKERS_LOG_LEVEL: 'info'}

let dataDir: string
let serve: ChildProcess
let stdout = ''
let stderr = ''
let exited: Promise<number | null>
let info: HostInfo

function cli(...args: string[]) {
  return promisify(execFile)(process.execPath, [CLI, ...args], {cwd: ROOT, env}).then(
    ({stdout: out}) => ({code: 0, stdout: out, stderr: ''}),
    (error: {code: number; stdout: string; stderr: string}) => ({code: error.code, stdout: error.stdout, stderr: error.stderr}),
  )
}

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-cli-host-'))
  serve = spawn(process.execPath, [CLI, 'host', 'serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
    cwd: ROOT,
    env,
  })
  serve.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  serve.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  exited = new Promise((resolve) => serve.once('exit', resolve))
  const deadline = Date.now() + 60_000
  for (;;) {
    const found = await readHostInfo(dataDir)
    if (found) {
      info = found
      break
    }
    if (serve.exitCode !== null || Date.now() > deadline) throw new Error(`host serve did not start: ${stderr}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
})

afterAll(async () => {
  if (serve?.exitCode === null) serve.kill('SIGKILL')
  if (dataDir) rmSync(dataDir, {recursive: true, force: true})
})

test('serves, pairs and stops cleanly on SIGTERM (exit 143, one line)', async () => {
  // Addresses: loopback, free ports, in host.json and in the logs.
  expect(info.publicUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
  expect(info.adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
  expect(info.pid).toBe(serve.pid)
  // host.json is written before the line is logged, and the pipe may bring it a moment later.
  const started = () =>
    stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as {msg: string; publicUrl?: string; adminUrl?: string})
      .find((line) => line.msg === 'edge host started')
  await expect.poll(started, {timeout: 30_000}).toMatchObject({publicUrl: info.publicUrl, adminUrl: info.adminUrl})
  expect((await fetch(`${info.adminUrl}/readyz`)).status).toBe(200)
  expect((await fetch(`${info.publicUrl}/livez`)).status).toBe(200)

  // The code: printed once by serve, again by `host pairing-code`, never logged.
  const code = /pairing code: (\S+)/.exec(stderr)?.[1]
  expect(code).toMatch(/^[0-9A-Z]{4}(-[0-9A-Z]{4}){4}$/)
  expect(stdout).not.toContain(code)
  expect(await cli('host', 'pairing-code', '--data-dir', dataDir)).toMatchObject({code: 0, stdout: `${code}\n`})

  const pair = await fetch(`${info.adminUrl}${paths.pair}`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({code})})
  const {secret} = (await pair.json()) as {secret: string}
  const client = new HostClient(() => info.adminUrl, secret)
  const name = scriptNameFor('cli/hello')
  await client.deploy(name, fixtureUpload('hello'))
  expect(await (await fetch(`${info.publicUrl}/${name}/`)).text()).toBe('Hello from an Edge Worker! (GET /)\n')

  const used = await cli('host', 'pairing-code', '--data-dir', dataDir)
  expect(used.code).toBe(6)
  expect(used.stderr).toContain('already used')

  const pidDir = path.join(dataDir, 'runtime', 'pids')
  const workerdPids = readdirSync(pidDir).map((file) => Number(path.extname(file).slice(1)))
  expect(workerdPids.length).toBeGreaterThan(0)
  serve.kill('SIGTERM')
  expect(await exited).toBe(143)
  for (const pid of workerdPids) expect(existsSync(`/proc/${pid}`)).toBe(false)
  expect(existsSync(path.join(dataDir, 'host.json'))).toBe(false)
  expect(readdirSync(pidDir)).toEqual([])
  expect(stdout).toContain('"msg":"edge host stopped"')
  // Neither the secret nor the code ever reached the logs.
  expect(stdout + stderr.replace(/pairing code: .*\n/, '')).not.toContain(secret)
  expect(stdout).not.toContain(code)
}, 120_000)
