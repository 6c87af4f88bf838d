// No orphaned workerd: a host killed with SIGKILL takes its workerd children along (parent-death
// signal) and its pid — a zombie nobody reaped — does not block the next start; leftovers a host
// recorded are killed by the next start, a reused pid never; and a stop with a Worker spinning in
// an endless loop (in the serving process and in one being replaced) still ends every child.
import {spawn} from 'node:child_process'
import {mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterEach, expect, test} from 'vitest'
import {readHostInfo} from '../../src/edge-host/host-info.js'
import {processStartTime} from '../../src/workerd/process-identity.js'
import {CLI_BIN} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {moduleUpload, scriptNameFor} from '../support/worker-fixtures.js'

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const running = (pid: number) => processStartTime(pid) !== null
const recordedPids = (dataDir: string) => readdirSync(path.join(dataDir, 'runtime', 'pids')).map((file) => Number(path.extname(file).slice(1)))

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

function tempDataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-orphans-'))
  cleanups.push(() => rmSync(dir, {recursive: true, force: true}))
  return dir
}

test('a host killed with SIGKILL takes its workerd along, and its unreaped pid does not block the restart', {timeout: 120_000}, async () => {
  const dataDir = tempDataDir()
  // `exec sleep` leaves the host a child of a process that never reaps it: once killed, it stays a zombie.
  const command = `"${process.execPath}" "${CLI_BIN}" host serve --data-dir "${dataDir}" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >/dev/null 2>&1 & exec sleep 600`
  const parent = spawn('sh', ['-c', command], {stdio: 'ignore', env: {...process.env, EDGEWORKERS_HOST__SHARDS: '2'}})
  cleanups.push(() => void parent.kill('SIGKILL'))
  await until(async () => (await readHostInfo(dataDir)) !== null, 'the host to start')
  const hostPid = (await readHostInfo(dataDir))!.pid
  await until(() => recordedPids(dataDir).length >= 2, 'both shards to run')
  const workerd = recordedPids(dataDir)

  process.kill(hostPid, 'SIGKILL')
  await until(() => workerd.every((pid) => !running(pid)), 'the old workerd processes to die with their host')
  // The killed host is still in the process table (a zombie): kill(pid, 0) would call it alive.
  expect(() => process.kill(hostPid, 0)).not.toThrow()

  const restarted = await startTestHost({dataDir})
  cleanups.push(() => restarted.stop())
  expect(restarted.host.ready()).toBe(true)
  expect(workerd.filter(running)).toEqual([])
})

test('a start kills the workerd leftovers its predecessor recorded, never a process that reused a recorded pid', {timeout: 60_000}, async () => {
  const dataDir = tempDataDir()
  const pidDir = path.join(dataDir, 'runtime', 'pids')
  mkdirSync(pidDir, {recursive: true})
  // Stand-ins for workerd processes a host left behind where no parent-death signal exists.
  const leftover = spawn('sleep', ['600'], {stdio: 'ignore'})
  const stranger = spawn('sleep', ['600'], {stdio: 'ignore'})
  cleanups.push(
    () => void leftover.kill('SIGKILL'),
    () => void stranger.kill('SIGKILL'),
  )
  const leftoverExited = new Promise((resolve) => leftover.once('exit', resolve))
  await until(() => processStartTime(leftover.pid!) !== null && processStartTime(stranger.pid!) !== null, 'the stand-ins to run')
  writeFileSync(path.join(pidDir, `shard-0.${leftover.pid}`), processStartTime(leftover.pid!)!)
  // Recorded with another start time: the pid now names a different process.
  writeFileSync(path.join(pidDir, `shard-1.${stranger.pid}`), '1')

  const host = await startTestHost({dataDir})
  cleanups.push(() => host.stop())
  await leftoverExited
  expect(running(stranger.pid!)).toBe(true)
  expect(recordedPids(dataDir)).not.toContain(leftover.pid)
  expect(recordedPids(dataDir)).not.toContain(stranger.pid)
})

test('a stop with a Worker spinning in an endless loop ends every workerd, the serving one and the one being replaced', {timeout: 120_000}, async () => {
  let host: TestHost | undefined = await startTestHost({settings: {shards: 1, drain_timeout_ms: 1_000, request_cpu_limit_ms: 600_000, code_loading: 'restart'}})
  cleanups.push(() => host?.stop())
  await host.pair()
  const client = host.client()
  const name = scriptNameFor('orphans/spin')
  await client.deploy(name, moduleUpload('export default { fetch() { for (;;) {} } }', {releaseGeneration: 'spin-1'}))
  const spinning = fetch(`${host.publicUrl}/${name}/`).catch(() => null)
  // A new release while the request spins: the old process (overlap mode, the restart path) waits for it to finish.
  await client.deploy(name, moduleUpload('export default { fetch() { for (;;) {} } }', {releaseGeneration: 'spin-2'}))
  const spinningAgain = fetch(`${host.publicUrl}/${name}/`).catch(() => null)
  const workerd = recordedPids(host.dataDir)
  expect(workerd.length).toBeGreaterThanOrEqual(2)

  await host.stop()
  host = undefined
  expect(workerd.filter(running)).toEqual([])
  await Promise.all([spinning, spinningAgain])
})
