// The real CLI: `edgeworkers host serve` as a subprocess — addresses in host.json, JSON logs, the
// pairing code printed once (and again by `host pairing-code`), serving, a clean SIGTERM, and a
// Ctrl-C under systemd: READY=1 and STOPPING=1 on the notify socket, priorities on every line, and no workerd exit taken for a crash.
import {execFile, spawn, type ChildProcess} from 'node:child_process'
import {closeSync, existsSync, fstatSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {promisify} from 'node:util'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {readHostInfo, type HostInfo} from '../../src/edge-host/host-info.js'
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
  await expect.poll(() => /pairing code: \S+/.test(stderr), {timeout: 30_000}).toBe(true)
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

/** A stand-in for systemd's notify socket: a Unix datagram socket (Node has none) whose datagrams it prints, one per line. */
function notifySocket(socketPath: string): {messages: () => string[]; bound: Promise<void>; close: () => void} {
  const receiver = spawn(
    'python3',
    [
      '-c',
      'import socket,sys\ns=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\ns.bind(sys.argv[1])\nprint("bound",flush=True)\nwhile True: print(s.recv(4096).decode().replace("\\n"," "),flush=True)',
      socketPath,
    ],
    {stdio: ['ignore', 'pipe', 'inherit']},
  )
  let out = ''
  receiver.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const bound = new Promise<void>((resolve, reject) => {
    receiver.stdout!.on('data', () => out.startsWith('bound\n') && resolve())
    receiver.once('exit', (code) => reject(new Error(`the notify socket stand-in exited ${code}`)))
  })
  return {messages: () => out.split('\n').slice(1, -1), bound, close: () => receiver.kill()}
}

test('Ctrl-C under systemd: READY=1 once it serves and STOPPING=1 (Type=notify); each JSON line carries its syslog priority and one pid; the stop logs no workerd crash', async () => {
  const journalDataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-cli-journal-'))
  // The journal's stream stands in as a file: JOURNAL_STREAM names stdout by device and inode, as systemd does.
  const logFile = path.join(journalDataDir, 'journal.log')
  const out = openSync(logFile, 'w')
  const {dev, ino} = fstatSync(out)
  const notify = notifySocket(path.join(journalDataDir, 'notify.sock'))
  await notify.bound
  // Its own process group, signalled as a whole as a terminal's Ctrl-C signals its foreground group.
  const host = spawn(process.execPath, [CLI, 'host', 'serve', '--data-dir', journalDataDir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
    cwd: ROOT,
    env: {...env, EDGEWORKERS_HOST__SHARDS: '2', JOURNAL_STREAM: `${dev}:${ino}`, NOTIFY_SOCKET: path.join(journalDataDir, 'notify.sock')},
    stdio: ['ignore', out, 'ignore'],
    detached: true,
  })
  closeSync(out)
  const hostExited = new Promise<number | null>((resolve) => host.once('exit', resolve))
  try {
    const deadline = Date.now() + 60_000
    while (!notify.messages().some((message) => message.startsWith('READY=1'))) {
      if (host.exitCode !== null || Date.now() > deadline) throw new Error(`host serve sent no READY=1: ${readFileSync(logFile, 'utf8')}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    // Ready means serving: every shard is up by then.
    const started = (await readHostInfo(journalDataDir))!
    expect((await fetch(`${started.adminUrl}/readyz`)).status).toBe(200)
    expect(notify.messages()[0]).toBe(`READY=1 STATUS=serving on ${started.publicUrl}, management on ${started.adminUrl}`)
    process.kill(-host.pid!, 'SIGINT')
    expect(await hostExited).toBe(130)
    expect(notify.messages().filter((message) => !message.startsWith('BARRIER=1'))).toEqual([expect.stringMatching(/^READY=1 /), 'STOPPING=1'])
  } finally {
    if (host.exitCode === null) process.kill(-host.pid!, 'SIGKILL')
    notify.close()
  }

  const lines = readFileSync(logFile, 'utf8').trim().split('\n')
  rmSync(journalDataDir, {recursive: true, force: true})
  const priorityOf: Record<number, string> = {20: '<7>', 30: '<6>', 40: '<4>', 50: '<3>', 60: '<2>'}
  const logs = lines.map((line) => {
    const [, priority, json] = /^(<\d>)(\{.*\})$/.exec(line) ?? []
    expect(json, line).toBeDefined()
    const log = JSON.parse(json!) as {level: number; msg: string; pid: number; workerdPid?: number}
    expect(priority, line).toBe(priorityOf[log.level])
    // pino writes the base's pid verbatim: a second "pid" key would be another process's, shadowing it.
    expect(line.match(/"pid":/g), line).toHaveLength(1)
    expect(log.pid).toBe(host.pid)
    return log
  })
  const serving = logs.filter((log) => log.msg === 'shard serving')
  expect(serving).toHaveLength(2)
  for (const log of serving) expect(log.workerdPid).toEqual(expect.any(Number))
  expect(logs.filter((log) => log.level >= 50)).toEqual([])
  expect(logs.at(-1)?.msg).toBe('edge host stopped')
}, 120_000)
