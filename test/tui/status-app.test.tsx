// The live status view with ink-testing-library, over a real store (both backends) through the real
// engine source: frames are asserted, keys go in through stdin. The paired host's address refuses
// connections, so the host panel shows a host that is down; a live host is in ./tmux.test.ts.
import net from 'node:net'
import {mkdirSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {cleanup, render} from 'ink-testing-library'
import {afterEach, beforeEach, describe, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine, silentLogger} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {engineStatusSource} from '../../src/engine/status/source.js'
import {artifactKeyFor} from '../../src/artifacts/store.js'
import {sha256Hex} from '../../src/canonical-json.js'
import {openStore, scriptNameFor, type OutboxRow, type Store} from '../../src/store/index.js'
import {StatusApp} from '../../src/tui/status-app.js'
import {describeEachStore, type StoreHarness} from '../support/stores.js'
import {KEYS, waitForFrame} from './support.js'

const SCOPE = 'onprem:0123456789ab'
const REFRESH_MS = 200
const OPERATOR = {type: 'operator', id: 'alice'}

afterEach(() => cleanup())

async function refusingUrl(): Promise<string> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return `http://127.0.0.1:${port}`
}

function view(t: StoreHarness) {
  const source = engineStatusSource(async () => createEngine(t.store, t.settings(), onPremHosts, silentLogger), OPERATOR)
  return render(<StatusApp source={source} intervalMs={REFRESH_MS} />)
}

/** Sets the fake terminal's size and tells the view, as a real terminal's resize does. */
function resize(stdout: NodeJS.EventEmitter, columns: number, rows: number): void {
  Object.defineProperty(stdout, 'columns', {value: columns, configurable: true})
  Object.defineProperty(stdout, 'rows', {value: rows, configurable: true})
  stdout.emit('resize')
}

async function settled(
  store: Store,
  status: 'failed' | 'uncertain',
  code: string,
  overrides: {script?: string; payload?: OutboxRow['payload']; operation?: OutboxRow['operation']} = {},
): Promise<OutboxRow> {
  const {row} = await store.outbox.enqueue({
    operation: overrides.operation ?? 'deploy',
    dedupe_key: `tui:${Math.random()}`,
    dispatch_namespace: SCOPE,
    script_name: overrides.script ?? null,
    payload: overrides.payload ?? {releaseGeneration: 'rg-1'},
  })
  const leased = await store.outbox.leaseById(row.id, {scope: SCOPE, owner: 'runner', leaseSeconds: 60})
  await store.outbox.settle(row.id, leased.row!.lease_token!, {status, errorCode: code, error: `because ${code}`, attempted: true})
  return (await store.outbox.get(row.id))!
}

describeEachStore('status view', (t) => {
  let failed: OutboxRow
  let leasedId: string

  beforeEach(async () => {
    await t.store.kit.savePairing({
      scope: SCOPE,
      host_url: await refusingUrl(),
      host_fingerprint: 'f'.repeat(64),
      host_public_key: 'unused',
      shared_secret: 'a'.repeat(64),
    })
    failed = await settled(t.store, 'failed', 'edge_host_5xx', {script: `dw-${'1'.repeat(48)}`, payload: {releaseGeneration: 'rg-7', apiKey: 'sk-live-secret'}})
    await settled(t.store, 'uncertain', 'worker_readiness_timeout', {operation: 'artifact_cleanup'})
    const {row} = await t.store.outbox.enqueue({
      operation: 'deploy',
      dedupe_key: 'tui:leased',
      dispatch_namespace: SCOPE,
      script_name: `dw-${'2'.repeat(48)}`,
      payload: {},
    })
    await t.store.outbox.leaseById(row.id, {scope: SCOPE, owner: 'host-b:4242:feed', leaseSeconds: 90})
    leasedId = row.id
  })

  test('shows scope, a host that is down and why, what needs attention, the lanes, and the panels; tab and arrows move', async () => {
    const {lastFrame, stdin, frames} = view(t)
    const first = await waitForFrame(lastFrame, 'host  DOWN')
    expect(first).toContain(`edgeworkers status  ${SCOPE}`)
    expect(first).toMatch(/host {2}DOWN http:\/\/127\.0\.0\.1:\d+: GET \/v1\/identity: edge host unreachable \(ECONNREFUSED\)/)
    expect(first).toContain('gates fence none  maintenance off')
    expect(first).toContain('ATTN  1 failed outbox row; 1 uncertain outbox row; edge host unreachable')
    expect(first).toMatch(/LANE +PEND +DEFER +DUE AGE +LEASED +EXP AGE +FAIL +UNCERT +DONE\/24h +CANC\/24h/)
    expect(first).toMatch(/deploy +0 +0 +- +1 +- +1 +0 +0 +0/)
    expect(first).toMatch(/artifact_cleanup +0 +0 +- +0 +- +0 +1/)
    // It opens on what needs attention; the operator's panel is never moved by a later refresh.
    expect(first).toContain('[Failed/uncertain 2]')
    stdin.write(KEYS.shiftTab)
    await waitForFrame(lastFrame, '[Leased 1]')
    const drawn = frames.length
    await waitForFrame(
      () => String(frames.length),
      (count) => Number(count) > drawn + 2,
    )
    expect(lastFrame()).toContain('[Leased 1]')
    // A lease asks nothing of the host, so the leased row has no attempt yet.
    expect(lastFrame()).toMatch(new RegExp(`${leasedId.slice(0, 8)} +deploy +dw-2222222222… +host-b:4242:feed +1m30s +0`))

    stdin.write(KEYS.tab)
    const groups = await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    expect(groups).toMatch(/failed +deploy +edge_host_5xx +1/)
    expect(groups).toMatch(/uncertain +artifact_cleanup +worker_readiness_timeout +1/)
    stdin.write(KEYS.tab)
    expect(await waitForFrame(lastFrame, '[Workers 0]')).toContain('no live Workers')
    stdin.write(KEYS.tab)
    expect(await waitForFrame(lastFrame, '[Retirements 0+0]')).toContain('no pending retirements or orphans')
    stdin.write(KEYS.tab)
    await waitForFrame(lastFrame, '[Audit 0]')
    stdin.write(KEYS.tab)
    await waitForFrame(lastFrame, '[Leased 1]')
    stdin.write(KEYS.left)
    await waitForFrame(lastFrame, '[Audit 0]')
  })

  test('a kit of several hosts: one line per host with its health and its lag behind the store', async () => {
    await t.store.tenants.createCompany({id: 'acme', name: 'Acme'})
    await t.store.tenants.createDepartment({id: 'acme-sales', company_id: 'acme', name: 'Sales'})
    const worker = await t.store.workers.create({
      company_id: 'acme',
      department_id: 'acme-sales',
      script_name: scriptNameFor('acme', 'acme-sales'),
      status: 'active',
    })
    const current = await t.store.workers.createVersion({
      worker_id: worker.id,
      release_generation: 'rg-1',
      builder_policy: 'department-worker-project-v2.9',
      state: 'deployed',
      project_artifact_key: artifactKeyFor('project', sha256Hex('project')),
      project_digest: sha256Hex('project'),
      bundle_artifact_key: artifactKeyFor('bundle', sha256Hex('bundle')),
      bundle_digest: sha256Hex('bundle'),
      manifest: {},
      receipt: {},
    })
    await t.exec(`update edge_workers set current_version_id = '${current.id}', serving_scope = '${SCOPE}' where id = '${worker.id}'`)
    const member = async (hex: string) => {
      const pairing = {
        scope: `onprem:${hex}`,
        host_url: await refusingUrl(),
        host_fingerprint: hex.padEnd(64, '0'),
        host_public_key: 'unused',
        shared_secret: 'b'.repeat(64),
      }
      t.clock.advance(1_000)
      await t.store.hosts.addMember(SCOPE, pairing, null)
      return pairing.scope
    }
    const [behind, down] = [await member('bbbbbbbbbbbb'), await member('cccccccccccc')]
    // The first host served the release; the other two missed it. None answers (the view marks them so as it reads).
    await t.store.hosts.confirmCurrent(SCOPE, [{script_name: worker.script_name, release_generation: 'rg-1'}])
    await t.store.hosts.markBehind(behind)
    await t.store.hosts.markBehind(down)

    const {lastFrame, stdout} = view(t)
    resize(stdout, 160, 40)
    const frame = await waitForFrame(lastFrame, (text) => [SCOPE, behind, down].every((host) => text.includes(`  ${host}  active    unreachable since`)))
    const lag = (host: string) =>
      new RegExp(`  ${host}  active    unreachable since 2026-01-01T\\S+, lag (\\d+), does not answer now \\(GET /v1/identity`).exec(frame)?.[1]
    expect([SCOPE, behind, down].map(lag)).toEqual(['0', '1', '1'])
    expect(frame).toContain(`edge host ${behind} does not answer`)
  })

  test('enter drills into a failed group, then into a row: ids, script, attempts, error, timestamps, payload with secrets redacted; esc goes back', async () => {
    const {lastFrame, stdin, stdout} = view(t)
    // Tall enough for the whole row; at 24 lines the payload is a scroll away.
    resize(stdout, 100, 40)
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    stdin.write(KEYS.enter)
    const group = await waitForFrame(lastFrame, new RegExp(`${failed.id.slice(0, 8)} +dw-1{16}… +1`))
    expect(group).toContain('failed deploy rows with last error edge_host_5xx')
    stdin.write(KEYS.enter)
    const detail = await waitForFrame(lastFrame, 'payload (secret-bearing fields redacted):')
    expect(detail).toContain(`outbox row ${failed.id}`)
    expect(detail).toMatch(/lane, status +deploy, failed/)
    expect(detail).toMatch(/script +dw-1{48}/)
    expect(detail).toMatch(/attempts +1, next attempt -/)
    expect(detail).toMatch(/last error +edge_host_5xx: because edge_host_5xx/)
    expect(detail).toMatch(/created, updated +2026-01-01T00:00:00\.000Z, 2026-01-01T00:00:00\.000Z/)
    expect(detail).toContain('"apiKey": "[redacted]"')
    expect(detail).toContain('"releaseGeneration": "rg-7"')
    expect(detail).not.toContain('sk-live-secret')
    stdin.write(KEYS.escape)
    await waitForFrame(lastFrame, 'failed deploy rows with last error edge_host_5xx')
    stdin.write(KEYS.escape)
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
  })

  test('r asks first; y retries the row (pending, audited); another key does nothing; cancel of a leased row is refused with its owner', async () => {
    const {lastFrame, stdin} = view(t)
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    stdin.write(KEYS.shiftTab)
    await waitForFrame(lastFrame, '[Leased 1]')
    stdin.write('c')
    await waitForFrame(lastFrame, /Cancel outbox row [0-9a-f]{8} \(deploy dw-2{16}…\)\? No lane will take it again\. \[y\/N\]/)
    stdin.write('y')
    await waitForFrame(lastFrame, `cannot cancel outbox row ${leasedId}: host-b:4242:feed holds its lease for`)
    expect(await t.store.outbox.get(leasedId)).toMatchObject({status: 'leased'})

    stdin.write(KEYS.tab)
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    stdin.write(KEYS.enter)
    await waitForFrame(lastFrame, new RegExp(`failed deploy rows with last error edge_host_5xx[\\s\\S]*${failed.id.slice(0, 8)} `))
    stdin.write('r')
    await waitForFrame(lastFrame, `Retry outbox row ${failed.id.slice(0, 8)} (deploy dw-${'1'.repeat(16)}…) now? [y/N]`)
    stdin.write('n')
    await waitForFrame(lastFrame, 'nothing done')
    expect(await t.store.outbox.get(failed.id)).toMatchObject({status: 'failed'})

    stdin.write('r')
    await waitForFrame(lastFrame, '[y/N]')
    stdin.write('y')
    await waitForFrame(lastFrame, `outbox row ${failed.id} is pending and due now`)
    expect(await t.store.outbox.get(failed.id)).toMatchObject({status: 'pending', last_error_code: 'edge_host_5xx'})
    expect(await t.store.audit.list({action: 'outbox_row.retried'})).toMatchObject([{resource_id: failed.id, actor_type: 'operator', actor_id: 'alice'}])
    // The group empties on the next refresh; the audit panel shows the action.
    await waitForFrame(lastFrame, 'no rows in this group any more')
    stdin.write(KEYS.escape)
    await waitForFrame(lastFrame, '[Failed/uncertain 1]')
    stdin.write(KEYS.shiftTab)
    stdin.write(KEYS.shiftTab)
    await waitForFrame(lastFrame, /\[Audit 1\][\s\S]*outbox_row\.retried +outbox_row:/)
  })

  test('b on a Worker asks first; a rollback target whose artifacts are gone is refused in the view, nothing written', async () => {
    await t.store.tenants.createCompany({id: 'acme', name: 'Acme'})
    await t.store.tenants.createDepartment({id: 'acme-sales', company_id: 'acme', name: 'Sales'})
    const worker = await t.store.workers.create({
      company_id: 'acme',
      department_id: 'acme-sales',
      script_name: scriptNameFor('acme', 'acme-sales'),
      status: 'active',
    })
    const version = (generation: string, state: 'superseded' | 'deployed') =>
      t.store.workers.createVersion({
        worker_id: worker.id,
        release_generation: generation,
        builder_policy: 'department-worker-project-v2.9',
        state,
        project_artifact_key: artifactKeyFor('project', sha256Hex(`project ${generation}`)),
        project_digest: sha256Hex(`project ${generation}`),
        bundle_artifact_key: artifactKeyFor('bundle', sha256Hex(`bundle ${generation}`)),
        bundle_digest: sha256Hex(`bundle ${generation}`),
        manifest: {},
        receipt: {},
      })
    const before = await version('rg-1', 'superseded')
    const current = await version('rg-2', 'deployed')
    await t.exec(`update edge_worker_versions set deployed_at = 1 where worker_id = '${worker.id}'`)
    await t.exec(`update edge_workers set current_version_id = '${current.id}', serving_scope = '${SCOPE}' where id = '${worker.id}'`)

    const {lastFrame, stdin} = view(t)
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    stdin.write(KEYS.tab)
    // On the Workers panel the key hints offer b where r and c (outbox rows) would be.
    expect(await waitForFrame(lastFrame, '[Workers 1]')).toMatch(/t tail +b rollback +p pass/)
    stdin.write(KEYS.enter)
    await waitForFrame(lastFrame, new RegExp(`version +${current.id}`))
    stdin.write(KEYS.escape)
    await waitForFrame(lastFrame, '[Workers 1]')
    stdin.write('b')
    await waitForFrame(lastFrame, 'Roll the Worker of acme-sales back to the version served before? [y/N]')
    stdin.write('n')
    await waitForFrame(lastFrame, 'nothing done')
    stdin.write('b')
    await waitForFrame(lastFrame, '[y/N]')
    stdin.write('y')
    // The versions' artifact keys name nothing in the artifact store: rollback refuses before writing.
    const refusal = `version ${before.id} cannot be rolled back to: project artifact ${before.project_artifact_key} is missing`
    await waitForFrame(lastFrame, (text) => text.replace(/\s+/g, ' ').includes(refusal)) // a long line wraps
    expect((await t.store.workers.listVersions(worker.id)).map((row) => [row.id, row.state])).toEqual([
      [before.id, 'superseded'],
      [current.id, 'deployed'],
    ])
    expect(await t.store.audit.list({action: 'edge_worker.rolled_back'})).toEqual([])
  })

  test('p runs one pass of the chosen lane after a confirmation', async () => {
    const {lastFrame, stdin} = view(t)
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    stdin.write('p')
    await waitForFrame(lastFrame, 'run one pass: 1 recovery  2 deferred  3 artifact_cleanup  4 control_audit')
    stdin.write('3')
    await waitForFrame(lastFrame, 'Run one artifact_cleanup pass now? [y/N]')
    stdin.write('y')
    await waitForFrame(lastFrame, /artifact cleanup pass: claimed 0, completed 0, retried 0, failed 0, uncertain 0, skipped 0 in \d+ ms/)
  })

  test('/ filters the rows; an unknown key or value is refused in the view; ? lists the keys; q quits', async () => {
    const {lastFrame, stdin, frames} = view(t)
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    stdin.write('/')
    const editing = await waitForFrame(lastFrame, 'filter: █')
    expect(editing).toContain('op: status: code: script: id: or plain words · enter applies · esc cancels')
    stdin.write('bogus:1')
    stdin.write(KEYS.enter)
    await waitForFrame(lastFrame, 'unknown filter key "bogus:" — use op:, status:, code:, script:, id: or plain words')
    for (let i = 0; i < 'bogus:1'.length; i++) stdin.write(KEYS.backspace)
    stdin.write('status:lost')
    stdin.write(KEYS.enter)
    await waitForFrame(lastFrame, 'unknown status "lost" — one of pending, deferred, leased, completed, failed, uncertain, cancelled')
    for (let i = 0; i < 'status:lost'.length; i++) stdin.write(KEYS.backspace)
    stdin.write('code:worker')
    stdin.write(KEYS.enter)
    const filtered = await waitForFrame(lastFrame, 'filter: code:worker')
    expect(filtered).toMatch(/uncertain +artifact_cleanup +worker_readiness_timeout/)
    expect(filtered).not.toMatch(/failed +deploy +edge_host_5xx/)
    stdin.write('/')
    await waitForFrame(lastFrame, 'filter: code:worker█')
    for (let i = 0; i < 'code:worker'.length; i++) stdin.write(KEYS.backspace)
    stdin.write(KEYS.enter)
    await waitForFrame(lastFrame, 'filter cleared')

    stdin.write('?')
    const help = await waitForFrame(lastFrame, 'run one pass of a lane')
    expect(help).toContain('filter rows: op:deploy status:failed')
    stdin.write('x')
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
    // Alive, the view draws a frame on every refresh; once q unmounted it, it draws nothing more.
    const whileAlive = frames.length
    await waitForFrame(
      () => String(frames.length),
      (count) => Number(count) > whileAlive,
    )
    expect(frames.length).toBeGreaterThan(whileAlive)
    stdin.write('q')
    await new Promise((resolve) => setTimeout(resolve, REFRESH_MS * 2))
    const afterQuit = frames.length
    await new Promise((resolve) => setTimeout(resolve, REFRESH_MS * 3))
    expect(frames.length).toBe(afterQuit)
  })

  test('at 80×24 every line fits and nothing is cut off the bottom; below 60×14 the view asks for a bigger terminal', async () => {
    const {lastFrame, stdout} = view(t)
    resize(stdout, 80, 24)
    const frame = await waitForFrame(lastFrame, (text) => text.includes('[Failed/uncertain 2]') && !text.includes('CANC/'))
    const lines = frame.split('\n')
    expect(lines.length).toBeLessThanOrEqual(23)
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(80)
    expect(lines.at(-1)).toBe('tab/←→:panel ↑↓:row ⏎:open t:tail r:retry c:cancel p:pass /:filter ?:keys q:quit')
    expect(frame).toContain('ATTN  1 failed outbox row')
    resize(stdout, 50, 10)
    await waitForFrame(lastFrame, 'terminal too small: 50×10')
    expect(lastFrame()).toContain('edgeworkers status needs at least 60×14')
    resize(stdout, 80, 24)
    await waitForFrame(lastFrame, '[Failed/uncertain 2]')
  })
})

describe('status view without a store', () => {
  test('a store that cannot be opened: the view says why and keeps trying; once it answers, the snapshot shows', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-tui-'))
    const file = path.join(dataDir, 'later', 'edgeworkers.sqlite')
    const settings = settingsSchema.parse({data_dir: dataDir, store: {url: file}})
    const opened: Store[] = []
    const source = engineStatusSource(async () => {
      const store = await openStore(settings)
      opened.push(store)
      return createEngine(store, settings, onPremHosts, silentLogger)
    }, OPERATOR)
    const {lastFrame} = render(<StatusApp source={source} intervalMs={REFRESH_MS} />)
    const down = await waitForFrame(lastFrame, 'store unavailable:')
    expect(down).toMatch(/store unavailable: SQLite store \/\S+\/later\/edgeworkers\.sqlite cannot be/)
    expect(down).toContain('retrying every 200ms; the host is read once the store answers')
    expect(down).not.toMatch(/\n\s+at /)

    mkdirSync(path.dirname(file))
    const store = await openStore(settings)
    await store.migrate()
    await store.close()
    const up = await waitForFrame(lastFrame, '[Leased 0]')
    expect(up).toContain('edgeworkers status  no scope (not paired)')
    expect(up).toContain('host  not usable: the store is not paired with an edge host')
    expect(up).not.toContain('store unavailable')
    cleanup()
    await Promise.all(opened.map((each) => each.close()))
    rmSync(dataDir, {recursive: true, force: true})
  })
})
