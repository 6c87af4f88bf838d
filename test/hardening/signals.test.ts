// Interrupted commands (issue #29, hole 5), with real CLI processes on both store backends against a
// real edge host: SIGINT exits 130 and SIGTERM 143, each after one line on stderr saying what was
// left. `backup create` stopped while its fence is held lifts that fence and removes its partial
// directory; a waiting `deploy` stopped while its upload is under way leaves its row queued and
// says so. Each signal is sent once a condition holds (the fence on the host, the upload seen).
import {existsSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, afterEach, beforeAll, expect, test} from 'vitest'
import {OnPremProvider} from '../../src/provider/onprem/client.js'
import {FaultProxy} from '../support/fault-proxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {spawnCli} from '../support/process.js'
import {describeStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const EXIT_CODES = {SIGINT: 130, SIGTERM: 143} as const

for (const backend of ['sqlite', 'postgres'] as const) {
  describeStore(backend, 'interrupted commands', (t) => {
    let host: TestHost
    const kit = new KitHarness(t, () => host)
    const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-signals-'))
    const env = () => ({EDGEWORKERS_STORE__URL: t.url, EDGEWORKERS_DATA_DIR: root})

    beforeAll(async () => {
      host = await startTestHost({settings: {shards: 1}})
    })
    afterAll(async () => {
      await host?.stop()
      rmSync(root, {recursive: true, force: true})
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

    /** Resolves once `probe` answers something truthy (polled: the condition lives in another process). */
    async function until<T>(what: string, probe: () => Promise<T | null | undefined | false> | T | null | undefined | false): Promise<T> {
      const deadline = Date.now() + 60_000
      for (;;) {
        const value = await probe()
        if (value) return value
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }

    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      test(`backup create stopped by ${signal} lifts its fence, removes its partial directory and exits ${EXIT_CODES[signal]}`, {
        timeout: 120_000,
      }, async () => {
        const {scope} = await kit.pair()
        // A deploy another runner holds keeps the backup waiting inside its fence (it drains in-flight deploys first).
        // The CLI reads that lease on the wall clock: the store's test clock is moved there first, or the
        // lease would have run out long ago and the backup would finish before the signal lands.
        t.clock.advance(Date.now() - t.clock.now())
        const {row} = await t.store.outbox.enqueue({
          operation: 'deploy',
          dedupe_key: `signals:${signal}:${Math.random()}`,
          dispatch_namespace: scope,
          script_name: null,
          payload: {releaseGeneration: 'rg-1'},
        })
        const leased = await t.store.outbox.leaseById(row.id, {scope, owner: 'another-runner', leaseSeconds: 300})
        const dir = path.join(root, `backup-${signal}`)
        const backup = spawnCli(['backup', 'create', dir], env())
        const fence = await until('the backup fence on the host, and its directory', async () => {
          const active = (await (await provider()).fenceStatus()).active
          return active && existsSync(dir) ? active : null
        })
        backup.child.kill(signal)
        expect(await backup.exited).toEqual({code: EXIT_CODES[signal], signal: null})
        expect(backup.stderr.trimEnd().split('\n')).toEqual([
          `interrupted by ${signal}: the backup fence ${fence.fenceId} was lifted and the partial backup ${dir} was removed; nothing was kept, run the backup again`,
        ])
        expect(existsSync(dir)).toBe(false)
        expect((await (await provider()).fenceStatus()).active).toBeNull()
        expect(await t.store.kit.openFence(scope)).toBeUndefined()
        await t.store.outbox.settle(row.id, leased.row!.lease_token!, {status: 'cancelled'})
      })
    }

    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      test(`a waiting deploy stopped by ${signal} while it uploads exits ${EXIT_CODES[signal]} and says its row stays queued for a pass`, {
        timeout: 120_000,
      }, async () => {
        let releaseUpload!: () => void
        const uploadHeld = new Promise<void>((resolve) => (releaseUpload = resolve))
        const proxy = await new FaultProxy(() => host.adminUrl).start()
        try {
          proxy.rule = ({method}) => (method === 'PUT' ? {kind: 'before_forward', run: () => uploadHeld} : {kind: 'forward'})
          await kit.pair(proxy.url)
          const department = await kit.department()
          const deploy = spawnCli(['deploy', path.join(FIXTURES_DIR, 'hello'), '--department', department], env())
          await until('the upload to reach the host', () => proxy.seen.some(({method}) => method === 'PUT'))
          deploy.child.kill(signal)
          expect(await deploy.exited).toEqual({code: EXIT_CODES[signal], signal: null})
          const [row] = await t.store.outbox.list({operation: 'deploy', status: 'leased'})
          expect(row).toBeDefined()
          expect(deploy.stderr.trimEnd().split('\n')).toEqual([
            `interrupted by ${signal}: outbox row ${row!.id} stays queued: its lease runs out at ${new Date(row!.lease_expires_at!).toISOString()}, then the next reconcile pass completes the deploy (\`edgeworkers outbox cancel ${row!.id}\` cancels it)`,
          ])
        } finally {
          releaseUpload()
          await proxy.stop()
          await kit.pair()
        }
      })
    }
  })
}
