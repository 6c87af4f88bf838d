// Two kits of three real edge hosts each sharing one database (docs/many-hosts.md), on both stores:
// each kit's deploy reaches its three hosts and none of the other kit's, every row is stamped with
// its own kit's scope, and a reconcile pass of one kit confirms only its own hosts.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {listKitHosts} from '../../src/engine/hosts/manage.js'
import {runPass} from '../../src/engine/pass/index.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import type {PairingResult} from '../../src/provider/types.js'
import {textProject} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {describeEachStore, type StoreHarness} from '../support/stores.js'

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-two-kits-'))
let hosts: TestHost[] = []
let pairings: PairingResult[] = []

beforeAll(async () => {
  hosts = await Promise.all([1, 2, 3, 4, 5, 6].map(() => startTestHost({settings: {shards: 1}})))
  pairings = await Promise.all(hosts.map((host) => pairWithHost(host.adminUrl, host.pairingCode!, 10_000)))
}, 300_000)
afterAll(async () => {
  await Promise.all(hosts.map((host) => host.stop()))
  rmSync(root, {recursive: true, force: true})
})

const project = (body: string) => textProject(root, body)

async function kitEngine(t: StoreHarness, scope: string): Promise<Engine> {
  const settings = settingsSchema.parse({...t.settings(), provider: {...t.settings().provider, scope}})
  return createEngine(t.store, settings, onPremHosts)
}

describeEachStore('two kits of three hosts on one database', (t) => {
  test("each kit's deploys reach its own hosts only, stamped with its own scope; a pass confirms only its own hosts", {timeout: 600_000}, async () => {
    const [a1, a2, a3, b1, b2, b3] = pairings as PairingResult[] as [PairingResult, PairingResult, PairingResult, PairingResult, PairingResult, PairingResult]
    // Each host joins a moment after the one before: `host list` shows them in the order they joined.
    await t.store.kit.savePairing(a1)
    await t.store.kit.savePairing(b1)
    for (const [anchor, member] of [
      [a1, a2],
      [b1, b2],
      [a1, a3],
      [b1, b3],
    ] as const) {
      t.clock.advance(1_000)
      await t.store.hosts.addMember(anchor.scope, member, null)
    }
    const kits = [
      {scope: a1.scope, engine: await kitEngine(t, a1.scope), hosts: hosts.slice(0, 3), department: `a-${t.backend}`},
      {scope: b1.scope, engine: await kitEngine(t, b1.scope), hosts: hosts.slice(3), department: `b-${t.backend}`},
    ]
    await t.store.tenants.createCompany({id: 'acme', name: 'Acme'})

    const scripts: string[] = []
    for (const kit of kits) {
      await t.store.tenants.createDepartment({id: kit.department, company_id: 'acme', name: kit.department})
      const outcome = await deployWorker(kit.engine, {projectDir: project(`kit ${kit.department}`), departmentId: kit.department, wait: true})
      expect(outcome).toMatchObject({state: 'completed'})
      scripts.push(outcome.scriptName)
    }

    // Both kits' passes at once on the one database: each claims only its own rows and hosts.
    const passes = await Promise.all(kits.map((kit) => runPass(kit.engine)))
    for (const pass of passes) expect(pass.lanes.filter((lane) => lane.error)).toEqual([])

    for (const [index, kit] of kits.entries()) {
      const other = kits[1 - index]!
      for (const host of kit.hosts) {
        expect(await (await request(`${host.publicUrl}/${scripts[index]}/`)).body.text()).toBe(`kit ${kit.department}`)
        expect((await request(`${host.publicUrl}/${scripts[1 - index]}/`)).statusCode).toBe(404)
      }
      const rows = await t.store.outbox.list({operation: 'deploy'})
      expect(rows.filter((row) => row.script_name === scripts[index]).map((row) => row.dispatch_namespace)).toEqual([kit.scope])
      expect((await t.store.workers.getByDepartment(kit.department))?.serving_scope).toBe(kit.scope)

      const listed = await listKitHosts(kit.engine)
      expect(listed.hosts.map((host) => [host.host, host.kit, host.health, host.lag])).toEqual(
        kit.hosts.map((host) => [host.host.scope, kit.scope, 'current', 0]),
      )
      // What the kit recorded as served names only its own hosts and its own Worker.
      const served = await t.store.hosts.releasesOf(kit.scope)
      expect(new Set(served.map((release) => release.host_scope))).toEqual(new Set(kit.hosts.map((host) => host.host.scope)))
      expect(new Set(served.map((release) => release.script_name))).toEqual(new Set([scripts[index]]))
      for (const host of other.hosts) expect((await t.store.hosts.getMember(host.host.scope))?.scope).toBe(other.scope)
    }
  })
})
