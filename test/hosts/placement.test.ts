// Owner hosts for stateful Workers (docs/many-hosts.md), end to end with three real edge hosts and a
// real HAProxy on the configuration `lb config --haproxy` writes: a Worker with Durable Objects runs
// on its owner alone (the others hold it handed over and answer 503 worker_moved), a stateless one
// on every host; `worker move` copies the data inside a fence — a write through the old owner is
// refused after the switch, what was written before is readable after — and a `worker move` killed
// -9 at each stage converges on a re-run (or a reconcile pass) with no data lost and never two hosts
// running the Worker;
// `host replace` (killed mid-move, then run again) moves the owner's Workers to a new machine.
import {appendFileSync, cpSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {execa} from 'execa'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import type {FaultPoint} from '../../src/engine/faults.js'
import {CLI_BIN, runCli, textProject, type CliResult} from '../support/cli.js'
import {freePort, startHaproxy, type RunningHaproxy} from '../../bench/support/haproxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {pairedHosts} from '../support/kit-hosts.js'

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-placement-'))
const dataDir = path.join(root, 'kit')
const env = {EDGEWORKERS_HOSTS__UNREACHABLE_GRACE_SECONDS: '0'}
const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir], env)
let hosts: TestHost[] = []
let lb: RunningHaproxy | undefined
let counter = ''
let hello = ''

async function ok(...args: string[]): Promise<CliResult> {
  const result = await cli(...args)
  expect({args, code: result.code, stderr: result.stderr}).toMatchObject({args, code: 0})
  return result
}

const call = async (base: string, method: 'GET' | 'POST' = 'GET') => {
  const response = await request(`${base}/${counter}/?name=visits`, {method})
  const text = await response.body.text()
  return {
    status: response.statusCode,
    body: response.statusCode === 200 ? (JSON.parse(text) as {value: number}).value : (JSON.parse(text) as {code: string}).code,
  }
}
/** What each host answers for the counter: its value where it runs, worker_moved where it does not. */
const perHost = () => Promise.all(hosts.map((host) => call(host.publicUrl)))
const scopeOf = (host: TestHost) => host.host.scope

async function ownerServer(): Promise<string | undefined> {
  const config = JSON.parse((await ok('lb', 'config', '--haproxy', '--json')).stdout) as {owned: Array<{scriptName: string; server: string}>}
  return config.owned.find((entry) => entry.scriptName === counter)?.server
}

async function restartLb(): Promise<RunningHaproxy> {
  await lb?.stop()
  const port = await freePort()
  const {text} = JSON.parse((await ok('lb', 'config', '--haproxy', '--bind', `127.0.0.1:${port}`, '--check-interval-ms', '200', '--json')).stdout) as {
    text: string
  }
  lb = await startHaproxy(text, `http://127.0.0.1:${port}`, root)
  await lb.waitFor((states) => [...states.values()].filter((state) => state === 'UP').length === states.size, 'every host up')
  return lb
}

/** `edgeworkers worker move` killed at `point` (the fault kills it with SIGKILL). */
async function killedMove(to: TestHost, point: FaultPoint): Promise<void> {
  const killed = await execa('node', [CLI_BIN, 'worker', 'move', 'sales', '--to', scopeOf(to), '--data-dir', dataDir], {
    reject: false,
    env: {...env, EDGEWORKERS_FAULT: point},
  })
  expect(killed.signal, killed.stderr).toBe('SIGKILL')
}

beforeAll(async () => {
  hosts = await pairedHosts(3, ok, {sales: 'Sales', web: 'Web'})
}, 300_000)
afterAll(async () => {
  await lb?.stop()
  await Promise.all(hosts.map((host) => host.stop()))
  rmSync(root, {recursive: true, force: true})
})

test('a Worker with Durable Objects runs on its owner alone, a stateless one everywhere; the LB routes the first to its owner', {
  timeout: 600_000,
}, async () => {
  const deployed = JSON.parse((await ok('deploy', 'fixtures/workers/counter', '--department', 'sales', '--json')).stdout) as {state: string; url: string}
  expect(deployed.state).toBe('completed')
  counter = new URL(deployed.url).pathname.split('/')[1]!
  hello = new URL(JSON.parse((await ok('deploy', textProject(root, 'stateless'), '--department', 'web', '--json')).stdout).url as string).pathname.split(
    '/',
  )[1]!
  // The hosts that hold the stateful Worker without running it are current too: no lag.
  const listed = JSON.parse((await ok('host', 'list', '--json')).stdout) as {hosts: Array<{lag: number}>}
  expect(listed.hosts.map((host) => host.lag)).toEqual([0, 0, 0])
  await ok('reconcile')

  // The first host by pairing order owns it; the others hold it without running it.
  expect(await call(hosts[0]!.publicUrl, 'POST')).toEqual({status: 200, body: 1})
  expect(await perHost()).toEqual([
    {status: 200, body: 1},
    {status: 503, body: 'worker_moved'},
    {status: 503, body: 'worker_moved'},
  ])
  for (const host of hosts) expect(await (await request(`${host.publicUrl}/${hello}/`)).body.text()).toBe('stateless')
  expect(await ownerServer()).toBe(scopeOf(hosts[0]!).replace('onprem:', 'h-'))
  // `host list` names the owner's Workers; the others own none.
  const owning = JSON.parse((await ok('host', 'list', '--json')).stdout) as {hosts: Array<{host: string; owns: string[]}>}
  expect(owning.hosts.map((host) => host.owns)).toEqual([[counter], [], []])
  expect((await ok('host', 'list')).stdout).toContain(`owns 1 (${counter})`)

  // Through the balancer every write reaches the one owner: the count never forks.
  await restartLb()
  const values: number[] = []
  for (let index = 0; index < 6; index++) values.push((await call(lb!.url, 'POST')).body as number)
  expect(values).toEqual([2, 3, 4, 5, 6, 7])
  for (let index = 0; index < 6; index++) expect(await (await request(`${lb!.url}/${hello}/`)).body.text()).toBe('stateless')

  // A new release keeps the owner and the data.
  const changed = path.join(root, 'counter-v2')
  cpSync('fixtures/workers/counter', changed, {recursive: true})
  appendFileSync(path.join(changed, 'index.js'), '// release two\n')
  expect(JSON.parse((await ok('deploy', changed, '--department', 'sales', '--json')).stdout)).toMatchObject({state: 'completed'})
  expect(await perHost()).toEqual([
    {status: 200, body: 7},
    {status: 503, body: 'worker_moved'},
    {status: 503, body: 'worker_moved'},
  ])
})

test('worker move: bad input is one line with its exit code and writes nothing; the data moves inside a fence', {timeout: 600_000}, async () => {
  const [first, second] = hosts as [TestHost, TestHost, TestHost]
  const oneLine = (result: CliResult, code: number, line: RegExp) => {
    expect({code: result.code, stdout: result.stdout}).toEqual({code, stdout: ''})
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(result.stderr.trimEnd()).toMatch(line)
  }
  const before = (await ok('lb', 'config', '--haproxy', '--json')).stdout
  oneLine(await cli('worker', 'move', 'sales', '--to', 'onprem:000000000000'), 5, /^error: no host "onprem:000000000000" in kit /)
  oneLine(await cli('worker', 'move', 'sales', '--to', scopeOf(first)), 6, /^error: Worker dw-\w+ is already owned by host onprem:\w{12}$/)
  oneLine(await cli('worker', 'move', 'web', '--to', scopeOf(second)), 6, /keeps no data on a host: it runs on every active host/)
  oneLine(await cli('worker', 'move', 'nobody', '--to', scopeOf(second)), 5, /^error: Worker nobody not found/)
  expect((await ok('lb', 'config', '--haproxy', '--json')).stdout).toBe(before)
  expect(await perHost()).toEqual([
    {status: 200, body: 7},
    {status: 503, body: 'worker_moved'},
    {status: 503, body: 'worker_moved'},
  ])

  const moved = JSON.parse((await ok('worker', 'move', 'sales', '--to', second.adminUrl, '--json')).stdout) as {from: string; to: string; files: number}
  expect(moved).toMatchObject({from: scopeOf(first), to: scopeOf(second)})
  expect(moved.files).toBeGreaterThan(0)
  // Written before the move, readable after it, on the new owner alone; the old owner refuses writes.
  expect(await perHost()).toEqual([
    {status: 503, body: 'worker_moved'},
    {status: 200, body: 7},
    {status: 503, body: 'worker_moved'},
  ])
  expect(await call(first.publicUrl, 'POST')).toEqual({status: 503, body: 'worker_moved'})
  expect(await ownerServer()).toBe(scopeOf(second).replace('onprem:', 'h-'))
  await restartLb()
  expect(await call(lb!.url, 'POST')).toEqual({status: 200, body: 8})
  await ok('reconcile')
  expect(await perHost()).toEqual([
    {status: 503, body: 'worker_moved'},
    {status: 200, body: 8},
    {status: 503, body: 'worker_moved'},
  ])
})

test('worker move killed -9 at each stage converges on a re-run or a reconcile pass: nothing lost, never two hosts running it', {
  timeout: 900_000,
}, async () => {
  const stages: FaultPoint[] = ['move.after_begin', 'move.after_fence', 'move.after_copy', 'move.after_deploy', 'move.after_switch']
  let owner = 1
  let value = 8
  for (const [index, stage] of stages.entries()) {
    const to = (owner + 1 + (index % 2)) % 3
    await killedMove(hosts[to]!, stage)
    const running = (await perHost()).filter((answer) => answer.status === 200)
    expect(running.length, stage).toBeLessThanOrEqual(1)
    for (const answer of running) expect(answer.body, stage).toBe(value)
    // Converged by a re-run of the move, or (once fenced) by the next reconcile pass.
    if (stage === 'move.after_fence') await ok('reconcile')
    else await ok('worker', 'move', 'sales', '--to', scopeOf(hosts[to]!))
    owner = to
    const expected = hosts.map((_, host) => (host === owner ? {status: 200, body: value} : {status: 503, body: 'worker_moved'}))
    expect(await perHost(), stage).toEqual(expected)
    expect(await call(hosts[owner]!.publicUrl, 'POST'), stage).toEqual({status: 200, body: ++value})
    expect(await ownerServer(), stage).toBe(scopeOf(hosts[owner]!).replace('onprem:', 'h-'))
  }
})

test('host replace, killed mid-move and run again: the new machine owns the Workers with their data; the old one is gone', {timeout: 900_000}, async () => {
  const ownerIndex = (await perHost()).findIndex((answer) => answer.status === 200)
  const old = hosts[ownerIndex]!
  const value = (await call(old.publicUrl)).body
  const fresh = await startTestHost({settings: {shards: 1, await_kit_confirmation: true}})
  hosts.push(fresh)
  const args = ['host', 'replace', scopeOf(old), fresh.adminUrl, '--code', fresh.pairingCode!, '--data-dir', dataDir]
  const killed = await execa('node', [CLI_BIN, ...args], {reject: false, env: {...env, EDGEWORKERS_FAULT: 'move.after_copy'}})
  expect(killed.signal, killed.stderr).toBe('SIGKILL')
  expect((await perHost()).filter((answer) => answer.status === 200).length).toBeLessThanOrEqual(1)

  const replaced = JSON.parse((await ok(...args.slice(0, -2), '--json')).stdout) as {
    old: string
    new: string
    paired: boolean
    moved: Array<{scriptName: string}>
  }
  expect(replaced).toMatchObject({old: scopeOf(old), new: scopeOf(fresh), paired: false, moved: [{scriptName: counter}]})
  expect(await call(fresh.publicUrl)).toEqual({status: 200, body: value})
  expect(await call(old.publicUrl, 'POST')).toEqual({status: 503, body: 'worker_moved'})
  expect(await (await request(`${fresh.publicUrl}/${hello}/`)).body.text()).toBe('stateless')
  const listed = JSON.parse((await ok('host', 'list', '--json')).stdout) as {hosts: Array<{host: string}>}
  expect(listed.hosts.map((host) => host.host)).not.toContain(scopeOf(old))
  expect(listed.hosts.map((host) => host.host)).toContain(scopeOf(fresh))
  expect(await ownerServer()).toBe(scopeOf(fresh).replace('onprem:', 'h-'))
  await restartLb()
  expect(await call(lb!.url, 'POST')).toEqual({status: 200, body: (value as number) + 1})

  // A drained host takes no Worker; the refusal is one line and writes nothing.
  const drained = hosts.find((host) => host !== old && host !== fresh)!
  await ok('host', 'drain', scopeOf(drained))
  const refused = await cli('worker', 'move', 'sales', '--to', scopeOf(drained))
  expect({code: refused.code, stdout: refused.stdout, lines: refused.stderr.trimEnd().split('\n').length}).toEqual({code: 6, stdout: '', lines: 1})
  expect(refused.stderr).toMatch(/^error: host onprem:\w{12} is draining; a Worker moves only to an active host/)
  expect(await ownerServer()).toBe(scopeOf(fresh).replace('onprem:', 'h-'))
  // A host that owns Workers is not removed: they would lose their data.
  await ok('host', 'drain', scopeOf(fresh))
  const kept = await cli('host', 'remove', scopeOf(fresh))
  expect({code: kept.code, stdout: kept.stdout}).toEqual({code: 6, stdout: ''})
  expect(kept.stderr).toMatch(/holds the data of 1 stateful Worker\(s\)/)
})
