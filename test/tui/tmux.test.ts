// `edgeworkers status` end to end in a real terminal: the built CLI runs inside tmux (its own server
// socket) against a real SQLite store and a real edge host running real workerd. Keys go in with
// send-keys; the pane is captured and polled until it shows what each step expects. Covers the live
// view, navigation and drill-in, the Workers panel and a live tail opened from it, an action with its confirmation, the filter's refusal, resizing to
// 80×24 and below the minimum, the host going down under it, and q restoring the terminal.
import {execFileSync} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import {openStore, type Store} from '../../src/store/index.js'
import {CLI_BIN} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const TMUX = '/usr/bin/tmux'
const SOCKET = `edgeworkers-status-test-${process.pid}-${randomBytes(3).toString('hex')}`
const SESSION = 'status'
/** Generous: the CLI starts in a fresh Node process on a loaded two-core machine. */
const STEP_DEADLINE_MS = 60_000

const tmux = (...args: string[]) => execFileSync(TMUX, ['-L', SOCKET, ...args], {encoding: 'utf8'})
const pane = () => tmux('capture-pane', '-p', '-t', SESSION)
const sendKeys = (...keys: string[]) => tmux('send-keys', '-t', SESSION, ...keys)

/** Polls the pane until `expected` shows; fails with the last capture after the deadline. */
async function waitForPane(expected: string | RegExp | ((text: string) => boolean)): Promise<string> {
  const matches = (text: string) => (typeof expected === 'string' ? text.includes(expected) : expected instanceof RegExp ? expected.test(text) : expected(text))
  const deadline = Date.now() + STEP_DEADLINE_MS
  for (;;) {
    const text = pane()
    if (matches(text)) return text
    if (Date.now() > deadline) throw new Error(`the pane never showed ${String(expected)}; it shows:\n${text}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

let host: TestHost
let store: Store
let failedId: string
let script: string
const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-status-tmux-'))

beforeAll(async () => {
  host = await startTestHost()
  const settings = settingsSchema.parse({data_dir: dataDir})
  store = await openStore(settings)
  await store.migrate()
  const pairing = await pairWithHost(host.adminUrl, host.pairingCode!, 10_000)
  await store.kit.savePairing(pairing)
  await store.tenants.createCompany({id: 'acme', name: 'Acme'})
  await store.tenants.createDepartment({id: 'acme-sales', company_id: 'acme', name: 'Sales'})
  const deployed = await deployWorker(await createEngine(store, settings, onPremHosts), {
    projectDir: path.join(FIXTURES_DIR, 'hello'),
    departmentId: 'acme-sales',
    wait: true,
  })
  expect(deployed.state).toBe('completed')
  script = deployed.scriptName
  // One request, so the Workers panel has a row.
  expect((await fetch(`${host.publicUrl}/${script}/before`)).status).toBe(200)
  const {row} = await store.outbox.enqueue({
    operation: 'artifact_cleanup',
    dedupe_key: 'tmux:failed',
    dispatch_namespace: pairing.scope,
    payload: {kind: 'bundle', object_key: 'bundle/gone', digest: '0'.repeat(64), password: 'never-shown'},
  })
  const leased = await store.outbox.leaseById(row.id, {scope: pairing.scope, owner: 'runner', leaseSeconds: 60})
  await store.outbox.settle(row.id, leased.row!.lease_token!, {status: 'failed', errorCode: 'artifact_delete_failed', error: 'disk says no', attempted: true})
  failedId = row.id

  // A clean environment: no CI variables (Ink would draw only its last frame), nothing of the test's.
  const command = [
    `echo BEFORE-STATUS`,
    `env -i PATH="$PATH" HOME="$HOME" TERM=screen ${process.execPath} ${CLI_BIN} status --data-dir ${dataDir} --interval 500`,
    `echo "EXITED:$?"`,
    `stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '`,
    `echo`,
    `sleep 600`,
  ].join('; ')
  tmux('-f', '/dev/null', 'new-session', '-d', '-s', SESSION, '-x', '100', '-y', '30', 'sh', '-c', command)
  tmux('set-option', '-g', 'window-size', 'manual')
})

afterAll(async () => {
  try {
    // tmux leaves its socket file behind.
    const socket = tmux('display-message', '-p', '#{socket_path}').trim()
    tmux('kill-server')
    rmSync(socket, {force: true})
  } catch {
    // The server is already gone.
  }
  await store?.close()
  await host?.stop()
  rmSync(dataDir, {recursive: true, force: true})
})

test('the live view in a real terminal: navigate, drill in, act, filter, resize, survive the host going down, quit and restore the terminal', {
  timeout: 15 * STEP_DEADLINE_MS,
}, async () => {
  const first = await waitForPane(/host {2}up .* ready {2}shards 2\/2 up {2}scripts 1 live, 0 locked, 0 retired/)
  expect(first).toMatch(/^edgeworkers status {2}onprem:[0-9a-f]{12}/m)
  expect(first).toContain('ATTN  1 failed outbox row')
  expect(first).toMatch(/^deploy +0 +0 +- +0 +- +0 +0 +1 +0$/m)
  expect(first).toMatch(/^artifact_cleanup +0 +0 +- +0 +- +1 +0 +0 +\d+$/m)
  // It opens on what needs attention: the failed row's group.
  expect(first).toContain('[Failed/uncertain 1]')
  await waitForPane(/failed +artifact_cleanup +artifact_delete_failed +1/)
  sendKeys('Enter')
  await waitForPane(new RegExp(`${failedId.slice(0, 8)} +- +1`))
  sendKeys('Enter')
  const detail = await waitForPane('payload (secret-bearing fields redacted):')
  expect(detail).toContain(`outbox row ${failedId}`)
  expect(detail).toMatch(/last error +artifact_delete_failed: disk says no/)
  expect(detail).toContain('"password": "[redacted]"')
  expect(detail).not.toContain('never-shown')

  sendKeys('r')
  await waitForPane(`Retry outbox row ${failedId.slice(0, 8)} (artifact_cleanup) now? [y/N]`)
  sendKeys('y')
  await waitForPane(`outbox row ${failedId} is pending and due now`)
  expect(await store.outbox.get(failedId)).toMatchObject({status: 'pending'})
  await waitForPane('ok    nothing needs attention')

  sendKeys('Escape')
  await waitForPane('rows with last error artifact_delete_failed')
  sendKeys('Escape')
  await waitForPane('[Failed/uncertain 0]')

  // The Workers panel names the Worker by department; t opens its live tail inside the view.
  sendKeys('Tab')
  await waitForPane(/^acme-sales +acme +[1-9]\d* +0 +\d+ms/m)
  sendKeys('t')
  await waitForPane(`live tail of ${script}`)
  await waitForPane('waiting for requests…')
  for (let sent = 0; !pane().includes('GET /from-tmux 200 ok'); sent++) {
    if (sent > 40) throw new Error(`the tail in the view never showed the request; it shows:\n${pane()}`)
    await fetch(`${host.publicUrl}/${script}/from-tmux`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  sendKeys('Escape')
  await waitForPane('[Workers')
  sendKeys('BTab')
  await waitForPane('[Failed/uncertain 0]')
  sendKeys('?')
  await waitForPane('run one pass of a lane')
  sendKeys('x')
  sendKeys('/')
  await waitForPane('filter: █')
  sendKeys('nope:x', 'Enter')
  await waitForPane('unknown filter key "nope:"')
  sendKeys('Escape')
  await waitForPane(/^tab\/←→ panel/m)

  tmux('resize-window', '-t', SESSION, '-x', '80', '-y', '24')
  const small = await waitForPane((text) => text.includes('[Failed/uncertain 0]') && /\?:keys q:quit\s*$/.test(text.trimEnd()) && !text.includes('CANC/'))
  expect(small.split('\n').every((line) => line.length <= 80)).toBe(true)
  expect(small).toContain('DONE/24h')
  tmux('resize-window', '-t', SESSION, '-x', '50', '-y', '10')
  await waitForPane('terminal too small: 50×10')
  tmux('resize-window', '-t', SESSION, '-x', '100', '-y', '30')
  await waitForPane('CANC/24h')

  await host.stop()
  const down = await waitForPane(/host {2}DOWN http:\/\/127\.0\.0\.1:\d+: .*(ECONNREFUSED|no complete answer)/)
  expect(down).toMatch(/^artifact_cleanup +1 /m)

  sendKeys('q')
  const after = await waitForPane(/EXITED:0\n-?icanon/)
  expect(after).toContain('BEFORE-STATUS')
  expect(after).not.toContain('edgeworkers status  onprem:')
  expect(after).toMatch(/^icanon echo\s*$/m)
})
