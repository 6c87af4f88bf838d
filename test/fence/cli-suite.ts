// The fence, maintenance and republish commands through the real CLI (a child process per run) on
// both store backends, against a real edge host: `fence run` lifts the fence whatever the command
// does — fails, gets SIGTERM — and when the CLI is SIGKILLed the host lifts it at its TTL and one
// reconcile pass records that and republishes the deploy it deferred. Bad input: one line, the
// documented exit code, nothing changed.
import {spawn} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, afterEach, beforeAll, beforeEach, expect, test} from 'vitest'
import {OnPremProvider} from '../../src/provider/onprem/client.js'
import {CLI_BIN, runCli, type CliResult} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeStore} from '../support/stores.js'
import type {Backend} from '../../src/store/index.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const HELLO = path.join(FIXTURES_DIR, 'hello')

async function until<T>(what: string, probe: () => Promise<T | undefined | null | false>, deadlineMs = 30_000): Promise<T> {
  const deadline = Date.now() + deadlineMs
  for (;;) {
    const value = await probe()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** The suite for one store backend: each backend has its own test file, so the two run in parallel. */
export function fenceCommandsSuite(backend: Backend): void {
  describeStore(backend, 'fence commands', (t) => {
    let host: TestHost
    const kit = new KitHarness(t, () => host)
    const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-fence-cli-'))
    const env = () => ({EDGEWORKERS_STORE__URL: t.url})
    /** The data dir goes before any `--`: after it, it would belong to the command `fence run` runs. */
    const withDataDir = (args: string[]) => {
      const end = args.includes('--') ? args.indexOf('--') : args.length
      return [...args.slice(0, end), '--data-dir', dataDir, ...args.slice(end)]
    }
    const cli = (...args: string[]) => runCli(withDataDir(args), env())

    beforeAll(async () => {
      host = await startTestHost({maxFenceTtlSeconds: 600})
    })
    afterAll(async () => {
      await host?.stop()
      rmSync(dataDir, {recursive: true, force: true})
    })
    beforeEach(async () => {
      await kit.pair()
    })
    afterEach(async () => {
      const status = await (await provider()).fenceStatus()
      if (status.active) await (await provider()).endFence(status.active.fenceId)
    })

    async function provider(): Promise<OnPremProvider> {
      const pairing = await kit.pair()
      const secret = await t.store.kit.pairingSecret(pairing.scope)
      return new OnPremProvider({baseUrl: host.adminUrl, scope: pairing.scope, secret: secret!, connectTimeoutMs: 5_000, readTimeoutMs: 10_000})
    }

    const oneLine = (result: CliResult, code: number, message: string | RegExp) => {
      expect(result).toMatchObject({code, stdout: ''})
      const line = result.stderr.trimEnd()
      expect(line.split('\n')).toHaveLength(1)
      if (typeof message === 'string') expect(line).toBe(`error: ${message}`)
      else expect(line).toMatch(message)
    }

    test('fence begin, status and end print the fence; bad input is refused with nothing changed', {timeout: 120_000}, async () => {
      const {scope} = await kit.pair()
      const [tooShort, tooLong, noneOpen, unknown] = await Promise.all([
        cli('fence', 'begin', '--ttl', '4'),
        cli('fence', 'begin', '--ttl', '999999'),
        cli('fence', 'end'),
        cli('fence', 'end', 'no-such-fence'),
      ])
      oneLine(tooShort, 2, 'fence TTL 4s is out of range: 5–86400 seconds (fence.max_ttl_seconds)')
      oneLine(tooLong, 2, 'fence TTL 999999s is out of range: 5–86400 seconds (fence.max_ttl_seconds)')
      oneLine(noneOpen, 5, `no backup fence is open for ${scope}`)
      oneLine(unknown, 5, 'backup fence no-such-fence not found')
      oneLine(await cli('fence', 'run'), 2, /^error: fence run needs a command after --/)
      expect(await t.store.kit.listFences(scope, 10)).toEqual([])

      const begun = await cli('fence', 'begin', '--ttl', '120', '--reason', 'nightly backup', '--json')
      expect(begun.code).toBe(0)
      const fence = JSON.parse(begun.stdout) as {id: string; state: string; reason: string}
      expect(fence).toMatchObject({state: 'active', reason: 'nightly backup'})

      oneLine(
        await cli('fence', 'begin', '--reason', 'second'),
        6,
        new RegExp(`^error: a fence is already open for ${scope}: ${fence.id} \\(nightly backup\\)`),
      )
      const status = await cli('fence', 'status')
      expect(status.code).toBe(0)
      expect(status.stdout).toContain(`store    fence ${fence.id} active`)
      expect(status.stdout).toMatch(new RegExp(`host     fenced by ${fence.id} \\(\\d+s left\\)`))

      const deferred = await cli('deploy', HELLO, '--department', await kit.department())
      expect(deferred.code).toBe(7)
      expect(deferred.stdout).toContain('deferred (edge_host_fenced)')

      const ended = await cli('fence', 'end', fence.id)
      expect(ended.code).toBe(0)
      expect(ended.stdout).toContain('state:   ended (ended)')
      expect(ended.stdout).toContain('republish: 1 deferred deploy claimed, 1 completed')
      oneLine(await cli('fence', 'end', fence.id), 6, new RegExp(`^error: backup fence ${fence.id} was already lifted at \\S+ \\(ended\\)$`))
    })

    test('fence run gives the command the fence id, returns its exit code and lifts the fence when it fails', {timeout: 120_000}, async () => {
      const {scope} = await kit.pair()
      const seen = path.join(dataDir, `fence-id-${t.backend}`)
      const script = `printf %s "$EDGEWORKERS_FENCE_ID" > ${seen}; printf %s "$EDGEWORKERS_BACKUP_STORE_LOCATION" > ${seen}.store; exit 3`
      const result = await cli('fence', 'run', '--ttl', '60', '--reason', 'failing backup', '--', 'sh', '-c', script)
      expect(result.code).toBe(3)
      const fenceId = readFileSync(seen, 'utf8')
      // The command learns where the store is, never its password.
      const location = readFileSync(`${seen}.store`, 'utf8')
      expect(location).toBe(t.backend === 'sqlite' ? t.url : t.url.replace(/:[^:@/]+@/, '@'))
      const password = t.backend === 'postgres' ? new URL(t.url).password : ''
      if (password) expect(location).not.toContain(`:${password}@`)
      const secret = (await t.store.kit.pairingSecret(scope))!
      const audit = JSON.stringify(await t.store.audit.list({limit: 100}))
      expect(audit).toContain(fenceId)
      expect(audit).not.toContain(secret)
      if (password) expect(audit + result.stdout + result.stderr).not.toContain(`:${password}@`)
      expect(result.stdout).toContain(`command exited 3\nfence ${fenceId} lifted`)
      expect(await t.store.kit.getFence(fenceId)).toMatchObject({scope, state: 'ended', end_reason: 'ended'})
      expect((await (await provider()).fenceStatus()).active).toBeNull()

      const missing = await cli('fence', 'run', '--ttl', '60', '--', 'no-such-command-edgeworkers')
      expect(missing).toMatchObject({code: 127, stderr: expect.stringContaining('ENOENT')})
      expect(await t.store.kit.openFence(scope)).toBeUndefined()
    })

    test('SIGTERM to fence run stops the command and still lifts the fence', {timeout: 120_000}, async () => {
      const {scope} = await kit.pair()
      const child = spawn(process.execPath, [CLI_BIN, ...withDataDir(['fence', 'run', '--ttl', '120', '--', 'sleep', '60'])], {
        env: {...process.env, ...env(), EDGEWORKERS_CONFIG: undefined},
        stdio: 'ignore',
      })
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
      const fence = await until('the fence to be held', async () => (await (await provider()).fenceStatus()).active)
      child.kill('SIGTERM')
      expect(await exited).toBe(143)
      expect(await t.store.kit.getFence(fence.fenceId)).toMatchObject({state: 'ended', end_reason: 'ended'})
      expect((await (await provider()).fenceStatus()).active).toBeNull()
      expect(await t.store.kit.openFence(scope)).toBeUndefined()
    })

    test('fence run SIGKILLed: the host lifts the fence at its TTL, and one reconcile pass records it and republishes', {timeout: 120_000}, async () => {
      const department = await kit.department()
      // Its own process group, so the test can kill the CLI and its command together, as an OOM kill would.
      const child = spawn(process.execPath, [CLI_BIN, ...withDataDir(['fence', 'run', '--ttl', '5', '--', 'sleep', '60'])], {
        env: {...process.env, ...env(), EDGEWORKERS_CONFIG: undefined},
        stdio: 'ignore',
        detached: true,
      })
      const exited = new Promise((resolve) => child.on('exit', resolve))
      const fence = await until('the fence to be held', async () => (await (await provider()).fenceStatus()).active)

      const deferred = await cli('deploy', HELLO, '--department', department, '--json')
      expect(deferred.code).toBe(7)
      const {scriptName} = JSON.parse(deferred.stdout) as {scriptName: string}
      process.kill(-child.pid!, 'SIGKILL')
      await exited
      expect(await t.store.kit.getFence(fence.fenceId)).toMatchObject({state: 'active', ended_at: null})

      await until('the host to lift the fence at its TTL', async () => (await (await provider()).fenceStatus()).active === null)
      const pass = await cli('reconcile', '--json')
      expect(pass.code).toBe(0)
      const result = JSON.parse(pass.stdout) as {fences: unknown[]; lanes: Array<{lane: string; claimed: number; completed: number}>}
      expect(result.fences).toEqual([{fenceId: fence.fenceId, outcome: 'expired_on_host'}])
      expect(result.lanes.find((lane) => lane.lane === 'deferred')).toMatchObject({claimed: 1, completed: 1})
      expect(await t.store.kit.getFence(fence.fenceId)).toMatchObject({state: 'ended', end_reason: 'expired'})
      expect((await fetch(`${host.publicUrl}/${scriptName}/`)).status).toBe(200)
    })

    test('maintenance on refuses deploys with 409 until off; republish runs the deferred lane on demand', {timeout: 120_000}, async () => {
      const department = await kit.department()
      oneLine(await cli('maintenance', 'on'), 2, /^error: Missing required flag reason/)
      const on = await cli('maintenance', 'on', '--reason', 'store upgrade')
      expect(on.code).toBe(0)
      expect(on.stdout).toContain('maintenance:     on (store upgrade)')
      const refused = await cli('deploy', HELLO, '--department', department)
      expect(refused.code).toBe(6)
      expect(refused.stderr).toBe('error: 409 edge_workers_maintenance: maintenance is on (store upgrade)\n')
      expect(await t.store.outbox.list({})).toEqual([])
      expect(JSON.parse((await cli('maintenance', 'status', '--json')).stdout)).toMatchObject({maintenance: {on: true, reason: 'store upgrade'}})

      // An uncertain deploy's repair (`outbox retry`) is gated like an enqueue.
      const {scope} = await kit.pair()
      const {row} = await t.store.outbox.enqueue({operation: 'deploy', dedupe_key: `uncertain-${t.backend}`, dispatch_namespace: scope, payload: {}})
      await t.exec(`update edge_worker_outbox set status = 'uncertain', last_error_code = 'worker_readiness_timeout' where id = '${row.id}'`)
      oneLine(await cli('outbox', 'retry', row.id), 6, '409 edge_workers_maintenance: maintenance is on (store upgrade)')
      expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'uncertain'})
      oneLine(await cli('outbox', 'retry', 'no-such-row'), 5, 'outbox row no-such-row not found')
      expect((await cli('maintenance', 'off')).code).toBe(0)
      const retried = await cli('outbox', 'retry', row.id)
      expect(retried).toMatchObject({code: 0, stdout: expect.stringContaining(`outbox row ${row.id} is pending and due now`)})
      expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'pending'})
      expect((await cli('outbox', 'cancel', row.id)).code).toBe(0)
      expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'cancelled'})

      const fence = JSON.parse((await cli('fence', 'begin', '--ttl', '60', '--json')).stdout) as {id: string}
      expect((await cli('deploy', HELLO, '--department', department)).code).toBe(7)
      const stillFenced = await cli('republish')
      expect(stillFenced.code).toBe(7)
      expect(stillFenced.stdout).toContain('nothing dispatched (Edge Workers execution is fenced)')
      expect((await cli('fence', 'end', fence.id, '--no-republish')).code).toBe(0)
      const republished = await cli('republish', '--json')
      expect(republished.code).toBe(0)
      expect(JSON.parse(republished.stdout)).toMatchObject({lane: 'deferred', claimed: 1, completed: 1})
    })
  })
}
