// Control state reaches a host that was down (docs/many-hosts.md), on both stores: two real edge
// hosts (host.await_kit_confirmation on) behind a real HAProxy. While one is stopped, a secret put
// and an API-key policy complete on the other; the host returns with the old policy and the old
// secret on disk, says not ready, and one reconcile pass copies it the kit's control state before
// confirming it; a revisioned mutation it refuses meanwhile (its revision is behind) completes on
// the other host instead of wedging. No request through the balancer after the mutations ever meets the old policy or
// the old secret, and the secret's value is in no row, log line or error on the way. A backup takes
// every host's snapshot under one fence, and with a host down holds the others and names it.
import {randomUUID} from 'node:crypto'
import {existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import pg from 'pg'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {createBackup, type BackupResult} from '../../src/engine/backup/create.js'
import {readSnapshotManifest} from '../../src/engine/backup/host-snapshot.js'
import {restoreBackup} from '../../src/engine/backup/restore.js'
import {createEngine, silentLogger, type Engine, type EngineLogger} from '../../src/engine/context.js'
import {applyControl, type ControlRequest} from '../../src/engine/control/apply.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {haproxyConfig} from '../../src/engine/hosts/haproxy.js'
import {listKitHosts} from '../../src/engine/hosts/manage.js'
import {runPass} from '../../src/engine/pass/index.js'
import {orphanReport} from '../../src/engine/retire/orphan-report.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import type {PairingResult} from '../../src/provider/types.js'
import {freePort, startHaproxy} from '../../bench/support/haproxy.js'
import {moduleProject} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {describeEachStore, type StoreHarness} from '../support/stores.js'

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-control-catch-up-'))
const OLD_SECRET = `Planted-old-${randomUUID()}`
const NEW_SECRET = `Planted-new-${randomUUID()}`
const hostLogs: string[] = []
let hosts: TestHost[] = []
let pairings: PairingResult[] = []

beforeAll(async () => {
  const onLog = (entry: Record<string, unknown>) => hostLogs.push(JSON.stringify(entry))
  hosts = await Promise.all([1, 2].map(() => startTestHost({settings: {shards: 1, await_kit_confirmation: true}, onLog})))
  pairings = await Promise.all(hosts.map((host) => pairWithHost(host.adminUrl, host.pairingCode!, 10_000)))
}, 300_000)
afterAll(async () => {
  await Promise.all(hosts.map((host) => host.stop()))
  rmSync(root, {recursive: true, force: true})
})

/** A Worker that answers its secret TOKEN. */
function secretProject(name: string): string {
  return moduleProject(root, name, "export default {fetch: (request, env) => new Response(env.TOKEN ?? 'no token')}\n")
}

/** Every line the engine logs, kept to search for the secret. */
function recordingLogger(lines: string[]): EngineLogger {
  const keep = (fields: object, message: string) => lines.push(`${message} ${JSON.stringify(fields)}`)
  return {debug: keep, info: keep, warn: keep, error: keep}
}

/** The store's every byte (SQLite file and WAL) or every row of every table (PostgreSQL), as text. */
async function storeText(t: StoreHarness): Promise<string> {
  if (t.backend === 'sqlite')
    return [t.url, `${t.url}-wal`]
      .filter(existsSync)
      .map((file) => readFileSync(file).toString('latin1'))
      .join('\n')
  const client = new pg.Client({connectionString: t.url})
  await client.connect()
  try {
    const tables = (await client.query<{name: string}>(`select tablename as name from pg_tables where schemaname = 'public'`)).rows
    const dumps: string[] = []
    for (const {name} of tables) dumps.push(JSON.stringify((await client.query(`select * from "${name}"`)).rows))
    return dumps.join('\n')
  } finally {
    await client.end()
  }
}

const readyz = async (host: TestHost) => (await request(`${host.publicUrl}/readyz`)).statusCode
const fetchWorker = async (url: string, apiKey?: string) => {
  const response = await request(url, {headers: apiKey ? {'x-api-key': apiKey} : {}})
  return {status: response.statusCode, body: await response.body.text()}
}

describeEachStore('control state reaches a host that was down', (t) => {
  test('a secret put and an API-key policy made while a host is down reach it before it is ready; the LB never serves the old ones', {
    timeout: 600_000,
  }, async () => {
    const logLines: string[] = []
    const [first, second] = pairings as [PairingResult, PairingResult]
    const [, returning] = hosts as [TestHost, TestHost]
    await t.store.kit.savePairing(first)
    t.clock.advance(1_000)
    await t.store.hosts.addMember(first.scope, second, null)
    const settings = settingsSchema.parse({...t.settings(), provider: {...t.settings().provider, scope: first.scope}, hosts: {unreachable_grace_seconds: 0}})
    const engine: Engine = await createEngine(t.store, settings, onPremHosts, recordingLogger(logLines))
    const departmentId = `tokens-${t.backend}`
    await t.store.tenants.createCompany({id: 'acme', name: 'Acme'})
    await t.store.tenants.createDepartment({id: departmentId, company_id: 'acme', name: departmentId})
    const control = async (controlRequest: ControlRequest) => {
      const result = await applyControl(engine, {departmentId, request: controlRequest, actor: {type: 'operator', id: 'test'}})
      expect(result.outcome).toMatchObject({state: 'completed'})
      return result
    }

    const deployed = await deployWorker(engine, {projectDir: secretProject(`token-${t.backend}`), departmentId, wait: true})
    expect(deployed).toMatchObject({state: 'completed'})
    const script = deployed.scriptName
    await control({operation: 'secrets.put', name: 'TOKEN', value: OLD_SECRET})
    expect((await runPass(engine)).lanes.filter((lane) => lane.error)).toEqual([])
    for (const host of hosts) expect(await fetchWorker(`${host.publicUrl}/${script}/`)).toEqual({status: 200, body: OLD_SECRET})

    const port = await freePort()
    const {text} = await haproxyConfig(engine, {bind: `127.0.0.1:${port}`, checkIntervalMs: 200})
    const lb = await startHaproxy(text, `http://127.0.0.1:${port}`, mkdtempSync(path.join(root, `lb-${t.backend}-`)))
    try {
      await lb.waitFor((states) => [...states.values()].filter((state) => state === 'UP').length === 2, 'both hosts up')
      const returningServer = returning.host.scope.replace(/^onprem:/, 'h-')

      // Steady traffic for the whole story, without the key and with it, each answer with when its request began.
      let apiKey: string | undefined
      const answers: Array<{startedAt: number; keyed: boolean; status: number; body: string}> = []
      let polling = true
      const poller = (async () => {
        while (polling) {
          for (const key of [undefined, apiKey]) {
            const startedAt = Date.now()
            const answer = await fetchWorker(`${lb.url}/${script}/`, key).catch((error: Error) => ({status: 0, body: error.message}))
            answers.push({startedAt, keyed: key !== undefined, ...answer})
          }
        }
      })()

      let changedAt = 0
      await returning.restart(undefined, async () => {
        await lb.waitFor((states) => states.get(returningServer) === 'DOWN', 'the stopped host marked down')
        await control({operation: 'secrets.put', name: 'TOKEN', value: NEW_SECRET})
        apiKey = (await control({operation: 'access_policy.api_key.rotate'})).apiKey
        changedAt = Date.now()
        const listed = await listKitHosts(engine)
        expect(listed.hosts.find((host) => host.host === returning.host.scope)).toMatchObject({health: 'unreachable'})
        // The orphan report lists host by host, and names the one that does not answer.
        const report = await orphanReport(engine)
        // (The hosts also serve the Worker of the other store's run, which this store does not own.)
        const unownedHere = t.backend === 'sqlite' ? 0 : 1
        expect(report.hosts?.[first.scope]).toMatchObject({error: null, listed: 1 + unownedHere, unowned: unownedHere})
        expect(report.hosts?.[second.scope]).toMatchObject({error: expect.stringContaining('edge host script listing failed'), listed: 0})
        expect(report).toMatchObject({namespace: first.scope, listed: 1 + unownedHere, unowned: unownedHere})
      })
      // Back with the old policy and the old secret on disk: it would serve them, but it is not ready.
      expect(await readyz(returning)).toBe(503)
      expect(await fetchWorker(`${returning.publicUrl}/${script}/`)).toEqual({status: 200, body: OLD_SECRET})
      // Its policy revision is behind the kit's: a revisioned mutation now is refused there and skipped, not wedged.
      const replaced = await control({operation: 'access_policy.replace', mode: 'api_key', ipAllowlist: []})
      expect(replaced.outcome.current).toMatchObject({mode: 'api_key', api_key_configured: true, revision: 2})
      const answered = answers.length
      await lb.waitFor(() => answers.length >= answered + 20, 'traffic while the returned host is not confirmed')

      const pass = await runPass(engine)
      expect(pass.lanes.filter((lane) => lane.error)).toEqual([])
      expect(await readyz(returning)).toBe(200)
      expect(await fetchWorker(`${returning.publicUrl}/${script}/`)).toEqual({status: 403, body: expect.any(String)})
      expect(await fetchWorker(`${returning.publicUrl}/${script}/`, apiKey)).toEqual({status: 200, body: NEW_SECRET})
      await lb.waitFor((states) => states.get(returningServer) === 'UP', 'the returned host marked up again')
      const upAt = answers.length
      await lb.waitFor(() => answers.length >= upAt + 60, 'traffic with both hosts up')
      polling = false
      await poller

      const after = answers.filter((answer) => answer.startedAt >= changedAt)
      expect(after.filter((answer) => answer.keyed).length).toBeGreaterThan(30)
      const wrong = after.filter((answer) => (answer.keyed ? answer.status !== 200 || answer.body !== NEW_SECRET : answer.status !== 403))
      expect(new Set(wrong.map((answer) => `${answer.keyed} ${answer.status} ${answer.body.slice(0, 200)}`))).toEqual(new Set())
      const listed = await listKitHosts(engine)
      expect(listed.hosts.map((host) => [host.host, host.health, host.lag])).toEqual(hosts.map((host) => [host.host.scope, 'current', 0]))

      // The values went host → kit → host in memory only: in no row, no kit log line, no host log line.
      const stored = await storeText(t)
      for (const value of [OLD_SECRET, NEW_SECRET, apiKey!]) {
        expect(stored.includes(value)).toBe(false)
        expect(logLines.filter((line) => line.includes(value))).toEqual([])
        expect(hostLogs.filter((line) => line.includes(value))).toEqual([])
      }
    } finally {
      await lb.stop()
    }
  })

  test('a backup covers every host under one fence; with a host down it holds the others and names the missing one', {timeout: 600_000}, async () => {
    const [first, second] = pairings as [PairingResult, PairingResult]
    const [, other] = hosts as [TestHost, TestHost]
    await t.store.kit.savePairing(first)
    t.clock.advance(1_000)
    await t.store.hosts.addMember(first.scope, second, null)
    const settings = settingsSchema.parse({...t.settings(), provider: {...t.settings().provider, scope: first.scope}, hosts: {unreachable_grace_seconds: 0}})
    const engine = await createEngine(t.store, settings, onPremHosts)
    const whole = await createBackup(engine, {dir: path.join(root, `backup-${t.backend}-whole`)})
    expect(whole.hosts.map((host) => [host.host, host.snapshot])).toEqual([
      [first.scope, 'host/snapshot.tar'],
      [second.scope, `hosts/${second.scope.slice('onprem:'.length)}.tar`],
    ])
    expect(whole.hostsMissing).toEqual([])
    for (const host of whole.hosts) expect((await readSnapshotManifest(path.join(whole.dir, host.snapshot))).fingerprint).toBe(host.fingerprint)
    expect(JSON.parse(readFileSync(whole.manifest, 'utf8'))).toMatchObject({
      hosts: whole.hosts.map(({host, fingerprint, snapshot}) => ({host, fingerprint, snapshot})),
    })

    let partial: BackupResult | undefined
    await other.restart(undefined, async () => {
      partial = await createBackup(engine, {dir: path.join(root, `backup-${t.backend}-partial`)})
    })
    expect(partial!.hosts.map((host) => host.host)).toEqual([first.scope])
    expect(partial!.hostsMissing).toEqual([{host: second.scope, error: expect.stringContaining('edge host unreachable')}])
    expect(JSON.parse(readFileSync(partial!.manifest, 'utf8'))).toMatchObject({hostsMissing: [{host: second.scope}]})
    // The fence was lifted on the host that answered; the one that was down never held it.
    expect(await t.store.kit.openFence(first.scope)).toBeUndefined()
    // Restoring the missing host's data from that backup is refused before anything changes.
    const restore = (dir: string, host: string) =>
      restoreBackup(settings, {dir, hostDataDir: path.join(root, `restored-${t.backend}-${host}`), host}, {log: silentLogger, hosts: onPremHosts})
    await expect(restore(partial!.dir, second.scope)).rejects.toThrow(
      `host ${second.scope} did not answer when the backup was taken; the backup holds no snapshot of it`,
    )
    await expect(restore(whole.dir, 'onprem:000000000000')).rejects.toThrow(
      `the backup holds no snapshot of host onprem:000000000000 (it holds: ${first.scope}, ${second.scope})`,
    )
  })
})
