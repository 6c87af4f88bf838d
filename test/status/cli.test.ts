// `edgeworkers status` outside a terminal, through the built CLI, on both backends against a real edge
// host: one snapshot (text or --json) and an exit code monitors can use — 0 when nothing needs
// attention, 13 when something does, 4 when the store is unavailable, 2 for bad flags.
import {mkdtempSync, rmSync} from 'node:fs'
import net from 'node:net'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import type {StatusSnapshot} from '../../src/engine/status/snapshot.js'
import {runCli} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const CLI_TIMEOUT_MS = 180_000

async function closedPort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

describeEachStore('edgeworkers status (snapshot)', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-status-cli-'))
  const status = (...args: string[]) => runCli(['status', '--data-dir', dataDir, ...args], {EDGEWORKERS_STORE__URL: t.url})

  beforeAll(async () => {
    host = await startTestHost()
  })
  afterAll(async () => {
    await host?.stop()
    rmSync(dataDir, {recursive: true, force: true})
  })

  test('paired with a live host and nothing wrong: the snapshot, exit 0', {timeout: CLI_TIMEOUT_MS}, async () => {
    const {scope} = await kit.pair()
    const [text, json] = await Promise.all([status(), status('--json')])
    expect(text.code).toBe(0)
    expect(text.stderr).toBe('')
    expect(text.stdout).toContain(`scope:       ${scope}`)
    expect(text.stdout).toMatch(/host: +up \(http:\/\/127\.0\.0\.1:\d+\), ready, shards 2\/2 up, scripts \d+ live, 0 locked down, 0 retired/)
    expect(text.stdout).toContain('attention:   nothing needs attention')
    expect(text.stdout).toMatch(/^LANE +PENDING +DEFERRED +OLDEST DUE +LEASED +OLDEST EXPIRED LEASE +FAILED +UNCERTAIN +COMPLETED 24h +CANCELLED 24h$/m)
    expect(json.code).toBe(0)
    const snapshot = JSON.parse(json.stdout) as StatusSnapshot
    expect(snapshot).toMatchObject({scope, attention: [], host: {paired: true, reachable: true, ready: true, shardsUp: 2}, orphans: {pending: 0}})
    expect(snapshot.lanes.map((lane) => lane.operation)).toEqual(['deploy', 'artifact_cleanup', 'control_audit'])
  })

  test('failed rows and an unreachable host need attention: exit 13, and the snapshot says why', {timeout: CLI_TIMEOUT_MS}, async () => {
    const {scope} = await kit.pair(`http://127.0.0.1:${await closedPort()}`)
    const {row} = await t.store.outbox.enqueue({operation: 'deploy', dedupe_key: 'cli:failed', dispatch_namespace: scope, payload: {}})
    const leased = await t.store.outbox.leaseById(row.id, {scope, owner: 'runner', leaseSeconds: 60})
    await t.store.outbox.settle(row.id, leased.row!.lease_token!, {status: 'failed', errorCode: 'edge_host_5xx', error: 'boom'})

    const [text, json] = await Promise.all([status(), status('--json')])
    expect(text.code).toBe(13)
    expect(text.stdout).toMatch(/^attention: +1 failed outbox row; edge host unreachable: .*ECONNREFUSED/m)
    expect(text.stdout).toMatch(/^failed +deploy +edge_host_5xx +1 /m)
    expect(json.code).toBe(13)
    expect((JSON.parse(json.stdout) as StatusSnapshot).attention).toEqual(['1 failed outbox row', expect.stringMatching(/^edge host unreachable: /)])
  })

  test('a Worker is listed before any traffic; failing most of its requests it needs attention, named by its department, with the version it serves: exit 13', {
    timeout: CLI_TIMEOUT_MS,
  }, async () => {
    await kit.pair()
    const department = await kit.department()
    const deployed = await deployWorker(await kit.engine(), {projectDir: path.join(FIXTURES_DIR, 'tail-logger'), departmentId: department, wait: true})
    expect(deployed.state).toBe('completed')
    // Listed before any traffic (so it can be tailed from the view), named by department and company.
    const quiet = await status('--json')
    expect(quiet.code, quiet.stderr).toBe(0)
    expect((JSON.parse(quiet.stdout) as StatusSnapshot).workers.workers).toContainEqual(
      expect.objectContaining({department_id: department, company_id: expect.any(String), requests: null, errorRateHigh: false}),
    )
    for (let request = 0; request < 10; request++) expect((await fetch(`${deployed.url}fail`)).status).toBe(503)
    expect((await fetch(deployed.url!)).status).toBe(200)

    const json = await status('--json')
    expect(json.code).toBe(13)
    const snapshot = JSON.parse(json.stdout) as StatusSnapshot
    expect(snapshot.attention).toContainEqual(expect.stringMatching(new RegExp(`^Worker ${department}: 10 of 11 requests failed in \\d+m$`)))
    expect(snapshot.workers.workers.find((row) => row.department_id === department)).toMatchObject({
      version_id: deployed.versionId,
      deployment: [{version_id: deployed.versionId, percentage: 100}],
      requests: 11,
      errors: 10,
      errorRateHigh: true,
    })
  })

  test('bad input: a store that cannot be reached or is not migrated exits 4 with one line; a bad --interval exits 2', {timeout: CLI_TIMEOUT_MS}, async () => {
    // Three independent processes: started together.
    const [unreachable, fresh, interval] = await Promise.all([
      runCli(['status', '--data-dir', dataDir], {
        EDGEWORKERS_STORE__URL:
          t.backend === 'postgres' ? `postgres://nobody:pw@127.0.0.1:${await closedPort()}/none` : path.join(dataDir, 'missing-dir', 'store.sqlite'),
      }),
      t.freshUrl().then((url) => runCli(['status', '--data-dir', dataDir], {EDGEWORKERS_STORE__URL: url})),
      status('--interval', '10'),
    ])
    expect(unreachable.code).toBe(4)
    expect(unreachable.stdout).toBe('')
    expect(unreachable.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(unreachable.stderr).toMatch(/^error: (PostgreSQL store .* is unavailable|store .*store\.sqlite does not exist; run `edgeworkers db migrate`)/)

    expect(fresh.code).toBe(4)
    // A fresh SQLite path is not created by a refused command; a fresh PostgreSQL database is empty.
    expect(fresh.stderr).toMatch(/^error: (store schema does not match this build .*|store .* does not exist); run `edgeworkers db migrate`\n$/)

    expect(interval.code).toBe(2)
    expect(interval.stderr).toBe('error: Parsing --interval: Expected an integer greater than or equal to 250 but received: 10\n')
  })
})
