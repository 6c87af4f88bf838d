// kill -9 of one of three edge hosts (`host serve` processes, real workerd) under steady load through
// a real HAProxy on the configuration `lb config --haproxy` writes: requests in flight on the dead
// host are retried on the others (retry-on, redispatch), and once HAProxy has marked it down not one
// request fails. bench/hosts/kill.ts measures the failure rate over a longer run.
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {Agent, request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {CLI_BIN, runCli, type CliResult} from '../support/cli.js'
import {freePort, startHaproxy, type RunningHaproxy} from '../../bench/support/haproxy.js'

interface ServedHost {
  child: ChildProcess
  dataDir: string
  adminUrl: string
  publicUrl: string
}

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-kill-host-'))
const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', path.join(root, 'kit')])
const served: ServedHost[] = []
let lb: RunningHaproxy | undefined

/** `host serve` on a data dir of its own, on free loopback ports, waiting for the kit after every start. */
async function serve(name: string): Promise<ServedHost> {
  const dataDir = path.join(root, name)
  const child = spawn(process.execPath, [CLI_BIN, 'host', 'serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
    env: {
      ...process.env,
      EDGEWORKERS_DATA_DIR: undefined,
      EDGEWORKERS_HOST__SHARDS: '1',
      EDGEWORKERS_HOST__AWAIT_KIT_CONFIRMATION: 'true',
      EDGEWORKERS_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'ignore'],
  })
  const deadline = Date.now() + 60_000
  for (;;) {
    try {
      const info = JSON.parse(readFileSync(path.join(dataDir, 'host.json'), 'utf8')) as {pid: number; adminUrl: string; publicUrl: string}
      if (info.pid === child.pid) return {child, dataDir, adminUrl: info.adminUrl, publicUrl: info.publicUrl}
    } catch {}
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`host serve ${name} did not start`)
    await sleep(100)
  }
}

async function ok(...args: string[]): Promise<CliResult> {
  const result = await cli(...args)
  expect({args, code: result.code, stderr: result.stderr}).toMatchObject({args, code: 0})
  return result
}

beforeAll(async () => {
  served.push(...(await Promise.all(['a', 'b', 'c'].map(serve))))
  await ok('db', 'migrate')
  for (const [index, host] of served.entries()) {
    const code = (await runCli(['host', 'pairing-code', '--data-dir', host.dataDir])).stdout.trim()
    await ok('host', 'pair', host.adminUrl, '--code', code, ...(index === 0 ? [] : ['--add']))
  }
  await ok('company', 'create', 'Acme', '--id', 'acme')
  await ok('department', 'create', 'acme', 'Sales', '--id', 'sales')
}, 300_000)
afterAll(async () => {
  await lb?.stop()
  for (const host of served) if (host.child.exitCode === null && host.child.signalCode === null) host.child.kill('SIGKILL')
  rmSync(root, {recursive: true, force: true})
})

test('kill -9 of one host under load: in-flight requests are retried elsewhere, and none fails once HAProxy marked it down', {timeout: 600_000}, async () => {
  const deployed = JSON.parse((await ok('deploy', 'fixtures/workers/hello', '--department', 'sales', '--json')).stdout) as {url: string}
  const script = new URL(deployed.url).pathname.split('/')[1]!
  await ok('reconcile')
  const port = await freePort()
  const {text} = JSON.parse((await ok('lb', 'config', '--haproxy', '--bind', `127.0.0.1:${port}`, '--check-interval-ms', '200', '--json')).stdout) as {
    text: string
  }
  lb = await startHaproxy(text, `http://127.0.0.1:${port}`, root)
  await lb.waitFor((states) => [...states.values()].filter((state) => state === 'UP').length === 3, 'all three hosts up')

  const dispatcher = new Agent({connections: 8})
  const outcomes: Array<{phase: 'before' | 'marking' | 'down'; ok: boolean}> = []
  let phase: 'before' | 'marking' | 'down' = 'before'
  let running = true
  const worker = async () => {
    while (running) {
      const started = phase
      try {
        const response = await request(`${lb!.url}/${script}/`, {dispatcher})
        const body = await response.body.text()
        outcomes.push({phase: started, ok: response.statusCode === 200 && body.startsWith('Hello from an Edge Worker!')})
      } catch {
        outcomes.push({phase: started, ok: false})
      }
    }
  }
  const workers = Array.from({length: 8}, worker)
  await lb.waitFor(() => outcomes.length >= 200, 'steady traffic before the kill')

  const victim = served[1]!
  const victimName = `h-${(await hostScopes())[1]!.replace(/^onprem:/, '')}`
  phase = 'marking'
  victim.child.kill('SIGKILL')
  await lb.waitFor((states) => states.get(victimName) === 'DOWN', 'the killed host marked down')
  phase = 'down'
  const downAt = outcomes.length
  await lb.waitFor(() => outcomes.length >= downAt + 500, 'traffic after the host was marked down')
  running = false
  await Promise.all(workers)
  await dispatcher.close()

  const failed = (which: string) => outcomes.filter((outcome) => outcome.phase === which && !outcome.ok).length
  expect({before: failed('before'), down: failed('down')}).toEqual({before: 0, down: 0})
  // While HAProxy had not yet marked it down, the requests it sent there were retried on the others.
  expect(failed('marking')).toBe(0)
  // The operator sees which host does not answer.
  const status = JSON.parse((await ok('host', 'status', '--json')).stdout) as {hosts: Array<{live: {reachable: boolean}}>}
  expect(status.hosts.map((host) => host.live.reachable)).toEqual([true, false, true])
  const snapshot = await cli('status', '--json')
  expect(snapshot.code).toBe(13)
  expect((JSON.parse(snapshot.stdout) as {attention: string[]}).attention).toContain(`edge host ${(await hostScopes())[1]} does not answer`)
})

async function hostScopes(): Promise<string[]> {
  return (JSON.parse((await ok('host', 'list', '--json')).stdout) as {hosts: Array<{host: string}>}).hosts.map((host) => host.host)
}
