// Many edge hosts per kit (docs/many-hosts.md), end to end: three real edge hosts (workerd shards,
// host.await_kit_confirmation on) paired with one kit through the real CLI, behind a real HAProxy on
// the configuration `lb config --haproxy` writes. A deploy while one host is down completes on the
// other two; the host returns with the old release on disk, answers /readyz 503 until a reconcile
// pass brought it current, and no request through the load balancer ever gets the old body.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {runCli, textProject, type CliResult} from '../support/cli.js'
import {freePort, startHaproxy, type RunningHaproxy} from '../../bench/support/haproxy.js'
import type {TestHost} from '../support/host.js'
import {pairedHosts} from '../support/kit-hosts.js'

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-many-hosts-'))
const dataDir = path.join(root, 'kit')
// A host that does not answer is skipped at once: the deploy under test must not wait out a grace.
const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir], {EDGEWORKERS_HOSTS__UNREACHABLE_GRACE_SECONDS: '0'})
let hosts: TestHost[] = []
let lb: RunningHaproxy | undefined

const project = (body: string) => textProject(root, body)

async function ok(...args: string[]): Promise<CliResult> {
  const result = await cli(...args)
  expect({args, code: result.code, stderr: result.stderr}).toMatchObject({args, code: 0})
  return result
}

const readyz = async (host: TestHost) => {
  const response = await request(`${host.publicUrl}/readyz`)
  return {status: response.statusCode, body: (await response.body.json()) as {kit: {awaitingKit: boolean; drained: boolean}}}
}
const body = async (url: string) => (await request(url)).body.text()
const serverName = (host: TestHost) => host.host.scope.replace(/^onprem:/, 'h-')

beforeAll(async () => {
  hosts = await pairedHosts(3, ok, {sales: 'Sales'})
}, 300_000)
afterAll(async () => {
  await lb?.stop()
  await Promise.all(hosts.map((host) => host.stop()))
  rmSync(root, {recursive: true, force: true})
})

test('a deploy with one host down completes on the others; the host returns not ready until current, and the LB never serves the old body', {
  timeout: 600_000,
}, async () => {
  // Started with await_kit_confirmation, no host takes traffic before the kit confirmed it.
  for (const host of hosts) expect(await readyz(host)).toMatchObject({status: 503, body: {kit: {awaitingKit: true, drained: false}}})
  const v1 = JSON.parse((await ok('deploy', project('release one'), '--department', 'sales', '--json')).stdout) as {state: string; url: string}
  expect(v1.state).toBe('completed')
  const script = new URL(v1.url).pathname.split('/')[1]!
  for (const host of hosts) expect(await body(`${host.publicUrl}/${script}/`)).toBe('release one')
  await ok('reconcile')
  for (const host of hosts) expect(await readyz(host)).toMatchObject({status: 200, body: {kit: {awaitingKit: false}}})
  const listed = JSON.parse((await ok('host', 'list', '--json')).stdout) as {hosts: Array<{host: string; state: string; health: string; lag: number}>}
  expect(listed.hosts.map((host) => [host.host, host.state, host.health, host.lag])).toEqual(hosts.map((host) => [host.host.scope, 'active', 'current', 0]))

  const port = await freePort()
  await ok('lb', 'config', '--haproxy', '--bind', `127.0.0.1:${port}`, '--check-interval-ms', '200', '--out', path.join(root, 'generated.cfg'))
  const config = (await ok('lb', 'config', '--haproxy', '--bind', `127.0.0.1:${port}`, '--check-interval-ms', '200', '--json')).stdout
  const {text, servers} = JSON.parse(config) as {text: string; servers: Array<{name: string; address: string}>}
  expect(servers.map((server) => server.address)).toEqual(hosts.map((host) => new URL(host.publicUrl).host))
  lb = await startHaproxy(text, `http://127.0.0.1:${port}`, root)
  await lb.waitFor((states) => [...states.values()].filter((state) => state === 'UP').length === 3, 'all three hosts up')

  // Steady traffic through the balancer for the whole story; each answer with when its request began.
  const answers: Array<{startedAt: number; status: number; body: string}> = []
  let polling = true
  const poller = (async () => {
    while (polling) {
      const startedAt = Date.now()
      try {
        const response = await request(`${lb!.url}/${script}/`)
        answers.push({startedAt, status: response.statusCode, body: await response.body.text()})
      } catch (error) {
        answers.push({startedAt, status: 0, body: (error as Error).message})
      }
    }
  })()

  const [, , third] = hosts as [TestHost, TestHost, TestHost]
  let v2CompletedAt = 0
  await third.restart(undefined, async () => {
    await lb!.waitFor((states) => states.get(serverName(third)) === 'DOWN', 'the stopped host marked down')
    const v2 = JSON.parse((await ok('deploy', project('release two'), '--department', 'sales', '--json')).stdout) as {state: string}
    expect(v2.state).toBe('completed')
    v2CompletedAt = Date.now()
    const down = JSON.parse((await ok('host', 'list', '--json')).stdout) as {hosts: Array<{host: string; health: string; lag: number}>}
    expect(down.hosts.find((host) => host.host === third.host.scope)).toMatchObject({health: 'unreachable', lag: 1})
  })
  // Back with the old release on disk: it would serve it, but says not ready, so the balancer keeps it out.
  expect(await readyz(third)).toMatchObject({status: 503, body: {kit: {awaitingKit: true}}})
  expect(await body(`${third.publicUrl}/${script}/`)).toBe('release one')
  const answered = answers.length
  await lb.waitFor(() => answers.length >= answered + 20, 'traffic while the returned host is not confirmed')
  expect((await lb.servers()).get(serverName(third))).toBe('DOWN')

  const pass = await ok('reconcile', '--json')
  expect(pass.stdout).toContain('"host_reconcile"')
  expect(await readyz(third)).toMatchObject({status: 200})
  expect(await body(`${third.publicUrl}/${script}/`)).toBe('release two')
  await lb.waitFor((states) => states.get(serverName(third)) === 'UP', 'the returned host marked up again')
  const upAt = answers.length
  await lb.waitFor(() => answers.length >= upAt + 60, 'traffic with all three hosts up')
  polling = false
  await poller

  const afterV2 = answers.filter((answer) => answer.startedAt >= v2CompletedAt)
  expect(afterV2.length).toBeGreaterThan(60)
  const wrong = afterV2.filter((answer) => answer.status !== 200 || answer.body !== 'release two')
  expect(new Set(wrong.map((answer) => `${answer.status} ${answer.body.slice(0, 200)}`))).toEqual(new Set())
  const status = JSON.parse((await ok('host', 'status', '--json')).stdout) as {hosts: Array<{host: string; health: string; lag: number}>}
  expect(status.hosts.map((host) => [host.host, host.health, host.lag])).toEqual(hosts.map((host) => [host.host.scope, 'current', 0]))
})

test('drain and remove: refusals are one line with their exit code and change nothing; a drained host says not ready', {timeout: 300_000}, async () => {
  const third = hosts[2]!
  const oneLine = (result: CliResult, code: number, line: RegExp) => {
    expect({code: result.code, stdout: result.stdout}).toEqual({code, stdout: ''})
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(result.stderr.trimEnd()).toMatch(line)
  }
  const before = (await ok('host', 'list', '--json')).stdout
  oneLine(await cli('host', 'drain', 'onprem:000000000000'), 5, /^error: no host "onprem:000000000000" in kit onprem:\w{12} \(hosts: /)
  oneLine(await cli('host', 'remove', third.host.scope), 6, /^error: host onprem:\w{12} still takes traffic; drain it first/)
  oneLine(await cli('host', 'pair', third.adminUrl, '--code', 'XXXX', '--add', '--replace'), 2, /--add|--replace/)
  expect((await ok('host', 'list', '--json')).stdout).toBe(before)

  const drained = JSON.parse((await ok('host', 'drain', third.adminUrl, '--json')).stdout) as {told: boolean; host: {state: string}}
  expect(drained).toMatchObject({told: true, host: {state: 'draining'}})
  expect(await readyz(third)).toMatchObject({status: 503, body: {kit: {drained: true}}})
  oneLine(await cli('host', 'drain', third.host.scope), 6, /^error: host onprem:\w{12} is already draining$/)
  await ok('reconcile')
  // Kept current, but a pass does not put a drained host back into the balancer.
  expect(await readyz(third)).toMatchObject({status: 503, body: {kit: {drained: true}}})
  const config = JSON.parse((await ok('lb', 'config', '--haproxy', '--json')).stdout) as {servers: Array<{host: string}>}
  expect(config.servers.map((server) => server.host)).toEqual([hosts[0]!.host.scope, hosts[1]!.host.scope])

  await ok('host', 'remove', third.host.scope)
  const left = JSON.parse((await ok('host', 'list', '--json')).stdout) as {hosts: Array<{host: string}>}
  expect(left.hosts.map((host) => host.host)).toEqual([hosts[0]!.host.scope, hosts[1]!.host.scope])
  oneLine(await cli('host', 'remove', third.host.scope), 5, /^error: no host /)
})
