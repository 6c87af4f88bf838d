// The control plane end to end, on both store backends and a real edge host: every control command
// through the built CLI, the data plane enforcing what it set, the Worker seeing what it put in its
// env; the control_audit lane settling a mutation whose command died (kill -9) or lost its answer,
// retrying a lost ack, refusing doctored receipts, and settling a retired Worker's rows without
// calling the host; and no secret value, API key or password anywhere it must not be.
import {appendFileSync, cpSync, mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {execa} from 'execa'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {applyControl, type ControlRequest} from '../../src/engine/control/apply.js'
import {validateReceipt, type ControlPayload} from '../../src/engine/control/operations.js'
import type {Engine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {runPass} from '../../src/engine/pass/run-pass.js'
import {retireDepartment} from '../../src/engine/retire/retire-department.js'
import type {OutboxRow} from '../../src/store/index.js'
import {CLI_BIN} from '../support/cli.js'
import {FaultProxy} from '../support/fault-proxy.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const CONTROL_ENV = path.join(FIXTURES_DIR, 'control-env')
const ACTOR = {type: 'operator', id: 'tester'}
const SECRET_VALUE = 'sekret-value-7f3a9c'
const PASSWORD = 'pa55word-e41b7d'
/** A dozen CLI processes, each a full node start: generous for a loaded machine. */
const CLI_TEST_TIMEOUT_MS = 180_000

interface WorkerEnv {
  token: string | null
  config: Record<string, unknown> | null
  settings: Record<string, unknown> | null
  accounts: Record<string, {username: string; password: string}> | null
}

describeEachStore('control plane', (t) => {
  let host: TestHost
  let proxy: FaultProxy
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1}})
    proxy = await new FaultProxy(() => host.adminUrl).start()
  })
  afterAll(async () => {
    await proxy?.stop()
    await host?.stop()
  })

  /** A department with a deployed control-env Worker; the kit talks to the host through the proxy. */
  async function deployed(overrides: Parameters<KitHarness['settings']>[0] = {}): Promise<{engine: Engine; department: string; scriptName: string}> {
    proxy.rule = () => ({kind: 'forward'})
    await kit.pair(proxy.url)
    const department = await kit.department()
    const engine = await kit.engine(overrides)
    const outcome = await deployWorker(engine, {projectDir: CONTROL_ENV, departmentId: department, wait: true})
    expect(outcome.state).toBe('completed')
    return {engine, department, scriptName: outcome.scriptName}
  }

  const worker = (scriptName: string, headers: Record<string, string> = {}) => request(`${host.publicUrl}/${scriptName}/`, {headers})
  const statusOf = async (scriptName: string, headers: Record<string, string> = {}) => {
    const response = await worker(scriptName, headers)
    await response.body.dump()
    return response.statusCode
  }
  const envOf = async (scriptName: string) => (await (await worker(scriptName)).body.json()) as WorkerEnv
  const controlRows = async (department: string): Promise<OutboxRow[]> =>
    (await t.store.outbox.list({operation: 'control_audit', limit: 1_000})).filter((row) => row.department_id === department)

  /** Counts of control calls the host applied, by operation (its /metrics). */
  async function hostApplies(operation: string): Promise<number> {
    const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
    const match = new RegExp(`^edgeworkers_host_control_calls_total\\{operation="${operation.replace(/\./g, '\\.')}",outcome="applied"\\} (\\d+)`, 'm').exec(
      text,
    )
    return match ? Number(match[1]) : 0
  }

  function cli(args: string[], options: {input?: string; env?: Record<string, string>} = {}) {
    const settings = kit.settings()
    return execa('node', [CLI_BIN, ...args], {
      reject: false,
      input: options.input,
      env: {EDGEWORKERS_DATA_DIR: settings.data_dir, EDGEWORKERS_STORE__URL: settings.store.url, EDGEWORKERS_LOG_LEVEL: 'debug', ...options.env},
    })
  }

  test('every control operation end to end: the data plane enforces it, the Worker sees it; rows completed, audited and acknowledged', async () => {
    const {engine, department, scriptName} = await deployed()
    const apply = async (request: ControlRequest) => {
      const result = await applyControl(engine, {departmentId: department, request, actor: ACTOR})
      expect(result.outcome, request.operation).toMatchObject({state: 'completed', acknowledged: true, code: null})
      return result
    }

    // Bad input is refused before anything is written or sent.
    const refusals: Array<[ControlRequest, string]> = [
      [{operation: 'secrets.put', name: '', value: 'x'}, 'usage'],
      [{operation: 'secrets.put', name: 'TOKEN', value: 'x'.repeat(65_537)}, 'usage'],
      [{operation: 'access_policy.replace', mode: 'public', ipAllowlist: ['10.0.0.1']}, 'usage'],
      [{operation: 'access_policy.replace', mode: 'teamsync_internal', ipAllowlist: ['not-an-ip']}, 'usage'],
      [{operation: 'runtime_config.replace', key: 'K', value: {big: 'x'.repeat(65_536)}}, 'usage'],
      [{operation: 'operation_settings.replace', settings: [1]}, 'usage'],
      [{operation: 'service_accounts.credentials.put', serviceAccountId: 'nobody', username: 'u', password: 'p'}, 'not_found'],
    ]
    for (const [request, code] of refusals) {
      await expect(applyControl(engine, {departmentId: department, request, actor: ACTOR}), JSON.stringify(request).slice(0, 80)).rejects.toMatchObject({code})
    }
    expect(await controlRows(department)).toEqual([])

    await apply({operation: 'secrets.put', name: 'TOKEN', value: SECRET_VALUE})
    await expect.poll(async () => (await envOf(scriptName)).token, {timeout: 15_000}).toBe(SECRET_VALUE)

    // Access policy: enforced as soon as the command returns.
    await apply({operation: 'access_policy.replace', mode: 'teamsync_internal', ipAllowlist: ['10.0.0.0/8']})
    expect(await statusOf(scriptName)).toBe(403)
    await apply({operation: 'access_policy.replace', mode: 'teamsync_internal', ipAllowlist: ['10.0.0.0/8', '127.0.0.1']})
    expect(await statusOf(scriptName)).toBe(200)
    const {outcome: rotated, apiKey} = await apply({operation: 'access_policy.api_key.rotate'})
    expect(rotated.current).toMatchObject({mode: 'api_key', api_key_last_four: apiKey!.slice(-4), ip_allowlist: []})
    const denied = await worker(scriptName)
    expect(denied.statusCode).toBe(403)
    expect(await denied.body.text()).toBe('{"code":"access_denied","message":"Forbidden"}')
    expect(await statusOf(scriptName, {'x-api-key': apiKey!})).toBe(200)
    expect((await apply({operation: 'access_policy.api_key.revoke'})).outcome.noop).toBe(false)
    expect(await statusOf(scriptName, {'x-api-key': apiKey!})).toBe(403)
    expect((await apply({operation: 'access_policy.api_key.revoke'})).outcome.noop).toBe(true)
    await apply({operation: 'access_policy.replace', mode: 'public', ipAllowlist: []})
    expect(await statusOf(scriptName)).toBe(200)

    // Runtime config and operation settings reach the Worker as JSON bindings.
    const config = await apply({operation: 'runtime_config.replace', key: 'FEATURES', value: {limit: 10, beta: true}})
    expect(config.outcome.current).toMatchObject({valueJson: '{"beta":true,"limit":10}', revision: 1})
    await expect.poll(async () => (await envOf(scriptName)).config, {timeout: 15_000}).toEqual({FEATURES: {beta: true, limit: 10}})
    await apply({operation: 'runtime_config.delete', key: 'FEATURES'})
    await apply({operation: 'operation_settings.replace', settings: {export: {enabled: false}}})
    await expect.poll(async () => (await envOf(scriptName)).settings, {timeout: 15_000}).toEqual({export: {enabled: false}})
    expect((await apply({operation: 'operation_settings.revoke'})).outcome.noop).toBe(false)

    const account = await t.store.tenants.createServiceAccount({department_id: department, name: 'robot'})
    // Named by its name, or by a unique prefix of its id: the Worker gets it under the id.
    await apply({operation: 'service_accounts.credentials.put', serviceAccountId: 'robot', username: 'robot', password: PASSWORD})
    await expect.poll(async () => (await envOf(scriptName)).accounts, {timeout: 15_000}).toEqual({[account.id]: {username: 'robot', password: PASSWORD}})
    await apply({operation: 'service_accounts.credentials.delete', serviceAccountId: account.id.slice(0, 8)})
    expect((await apply({operation: 'secrets.delete', name: 'TOKEN'})).outcome.noop).toBe(false)
    expect((await apply({operation: 'secrets.delete', name: 'TOKEN'})).outcome.noop).toBe(true)
    await expect.poll(async () => envOf(scriptName), {timeout: 15_000}).toEqual({token: null, config: null, settings: null, accounts: null})

    const rows = await controlRows(department)
    expect(rows).toHaveLength(15)
    for (const row of rows) {
      expect(row).toMatchObject({status: 'completed', next_attempt_at: null, last_error_code: null})
      const audit = await t.store.audit.get(row.id)
      expect(audit).toMatchObject({resource_type: 'edge_worker', resource_id: row.worker_id, actor_id: 'tester', digest: row.payload.commandDigest})
      expect(audit!.action.replace(/\.noop$/, '')).toBe(row.payload.operation)
    }
    const audit = await t.store.audit.list({limit: 1_000})
    for (const secret of [SECRET_VALUE, PASSWORD, apiKey!]) expect(JSON.stringify([rows, audit])).not.toContain(secret)
  })

  test(
    'the CLI: secrets from stdin, the API key shown once, --json and logs without a secret; bad input refused with nothing written',
    async () => {
      const {department, scriptName} = await deployed()
      const account = await t.store.tenants.createServiceAccount({department_id: department, name: 'robot'})
      const keyFile = path.join(kit.settings().data_dir, `${department}.key`)
      const outputs: string[] = []
      const run = async (args: string[], input?: string) => {
        const result = await cli([...args, '--json'], {input})
        outputs.push(result.stdout, result.stderr)
        expect(result.exitCode, `${args.join(' ')}: ${result.stderr}`).toBe(0)
        return JSON.parse(result.stdout) as Record<string, any>
      }

      expect(await run(['secret', 'put', department, 'TOKEN'], `${SECRET_VALUE}\n`)).toMatchObject({
        state: 'completed',
        acknowledged: true,
        operation: 'secrets.put',
      })
      await expect.poll(async () => (await envOf(scriptName)).token, {timeout: 15_000}).toBe(SECRET_VALUE)
      expect((await run(['secret', 'list', department])).secrets).toEqual([
        {name: 'TOKEN', sha256: expect.stringMatching(/^[0-9a-f]{12}$/), updatedAt: expect.any(String)},
      ])
      await run(['service-account', 'credentials', 'put', department, account.id, '--username', 'robot'], PASSWORD)
      const rotated = await run(['api-key', 'rotate', department, '--key-file', keyFile])
      const apiKey = readFileSync(keyFile, 'utf8').trim()
      expect(rotated).toMatchObject({state: 'completed', current: {mode: 'api_key', api_key_last_four: apiKey.slice(-4)}, keyFile})
      expect(await statusOf(scriptName)).toBe(403)
      expect(await statusOf(scriptName, {authorization: `Bearer ${apiKey}`})).toBe(200)
      expect(await run(['access-policy', 'show', department])).toMatchObject({accessPolicy: {mode: 'api_key', api_key_last_four: apiKey.slice(-4)}})

      const cases: Array<[string[], number, string | undefined]> = [
        [['secret', 'put', department, '1BAD'], 2, 'x'],
        [['runtime-config', 'set', department, 'K', '[1,2]'], 2, undefined],
        [['api-key', 'rotate', department, '--json'], 2, undefined],
        [['secret', 'put', 'no-such-department', 'TOKEN'], 5, 'x'],
      ]
      // Refusals write nothing, so they may run side by side.
      const refused = await Promise.all(cases.map(async ([args, code, input]) => ({args, code, result: await cli(args, {input})})))
      for (const {args, code, result} of refused) {
        expect(result.exitCode, args.join(' ')).toBe(code)
        expect(result.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1)
      }
      expect(await controlRows(department)).toHaveLength(3)

      // Nothing secret in the store, the audit log, the CLI's debug logs or its --json output.
      const stored = [JSON.stringify(await t.store.outbox.list({limit: 1_000})), JSON.stringify(await t.store.audit.list({limit: 1_000}))]
      for (const secret of [SECRET_VALUE, PASSWORD, apiKey]) expect([...stored, ...outputs].join('\n')).not.toContain(secret)
    },
    CLI_TEST_TIMEOUT_MS,
  )

  test('secrets and runtime config survive a redeploy and a host restart', async () => {
    const {engine, department, scriptName} = await deployed()
    await applyControl(engine, {departmentId: department, request: {operation: 'secrets.put', name: 'TOKEN', value: SECRET_VALUE}, actor: ACTOR})
    await applyControl(engine, {departmentId: department, request: {operation: 'runtime_config.replace', key: 'LIMITS', value: {rps: 5}}, actor: ACTOR})
    const expected = {token: SECRET_VALUE, config: {LIMITS: {rps: 5}}, settings: null, accounts: null}
    await expect.poll(async () => envOf(scriptName), {timeout: 15_000}).toEqual(expected)

    // A new release of the same Worker (one more module line) keeps what the control plane set.
    const project = mkdtempSync(path.join(tmpdir(), 'control-env-v2-'))
    cpSync(CONTROL_ENV, project, {recursive: true})
    appendFileSync(path.join(project, 'index.js'), '// release 2\n')
    const redeployed = await deployWorker(engine, {projectDir: project, departmentId: department, wait: true})
    expect(redeployed).toMatchObject({state: 'completed', reused: false})
    expect(await envOf(scriptName)).toEqual(expected)

    await host.restart()
    await expect.poll(async () => (await worker(scriptName)).statusCode, {timeout: 30_000}).toBe(200)
    expect(await envOf(scriptName)).toEqual(expected)
  })

  test('killed between the host mutation and the receipt read: one reconcile settles it completed, applied once', async () => {
    const {department, scriptName} = await deployed()
    const before = await hostApplies('secrets.put')
    const crashed = await cli(['secret', 'put', department, 'TOKEN', '--json'], {
      input: SECRET_VALUE,
      env: {EDGEWORKERS_FAULT: 'control.after_mutation', EDGEWORKERS_CONTROL_AUDIT__LEASE_SECONDS: '1'},
    })
    expect(crashed.signal).toBe('SIGKILL')
    const [row] = await controlRows(department)
    expect(row).toMatchObject({status: 'leased', operation: 'control_audit'})

    // The command's lease ran on the wall clock; this store's clock moves by hand.
    t.clock.advance(Date.now() - t.clock.now() + 2_000)
    const pass = await runPass(await kit.engine(), {lanes: ['control_audit']})
    expect(pass.lanes[0]).toMatchObject({lane: 'control_audit', completed: 2, failed: 0, note: 'retired=0 ack_retired=0'})
    expect(await t.store.outbox.get(row!.id)).toMatchObject({status: 'completed', next_attempt_at: null, last_error_code: null})
    expect(await t.store.audit.get(row!.id)).toMatchObject({action: 'secrets.put', resource_id: row!.worker_id, digest: row!.payload.commandDigest})
    expect(await hostApplies('secrets.put')).toBe(before + 1)
    await expect.poll(async () => (await envOf(scriptName)).token, {timeout: 15_000}).toBe(SECRET_VALUE)
    // A second pass finds nothing to do.
    expect((await runPass(await kit.engine(), {lanes: ['control_audit']})).lanes[0]).toMatchObject({claimed: 0})
  })

  test('an answer lost after the host applied it: pending, then the lane settles it from the receipt after the request grace', async () => {
    const {engine, department} = await deployed()
    proxy.rule = ({method, url}) => (method === 'PUT' && url.includes('/access-policy') ? {kind: 'forward_then_cut'} : {kind: 'forward'})
    const {outcome} = await applyControl(engine, {
      departmentId: department,
      request: {operation: 'access_policy.replace', mode: 'teamsync_internal', ipAllowlist: []},
      actor: ACTOR,
    })
    expect(outcome).toMatchObject({state: 'pending', code: 'edge_host_no_answer'})
    proxy.rule = () => ({kind: 'forward'})

    expect((await runPass(engine, {lanes: ['control_audit']})).lanes[0]).toMatchObject({claimed: 0})
    t.clock.advance(engine.settings.control_audit.request_grace_seconds * 1000)
    expect((await runPass(engine, {lanes: ['control_audit']})).lanes[0]).toMatchObject({completed: 2})
    expect(await t.store.outbox.get(outcome.outboxId)).toMatchObject({status: 'completed', next_attempt_at: null})
  })

  test('a mutation the host never got: the lane fails it control_receipt_not_found, and never sends it', async () => {
    const {engine, department} = await deployed()
    proxy.rule = ({method}) => (method === 'PUT' ? {kind: 'answer', status: 502, body: {code: 'bad_gateway', message: 'proxy'}} : {kind: 'forward'})
    const {outcome} = await applyControl(engine, {
      departmentId: department,
      request: {operation: 'secrets.put', name: 'TOKEN', value: SECRET_VALUE},
      actor: ACTOR,
    })
    expect(outcome.state).toBe('pending')
    t.clock.advance(engine.settings.control_audit.request_grace_seconds * 1000)
    proxy.seen.length = 0
    expect((await runPass(engine, {lanes: ['control_audit']})).lanes[0]).toMatchObject({failed: 1})
    expect(await t.store.outbox.get(outcome.outboxId)).toMatchObject({status: 'failed', last_error_code: 'control_receipt_not_found'})
    expect(proxy.seen.filter((call) => call.method !== 'GET')).toEqual([])
  })

  test('a lost ack is retried by the ack round on the backoff ladder', async () => {
    const {engine, department} = await deployed()
    proxy.rule = ({url}) => (url.endsWith('/ack') ? {kind: 'answer', status: 503, body: {code: 'internal_error', message: 'proxy'}} : {kind: 'forward'})
    const {outcome} = await applyControl(engine, {departmentId: department, request: {operation: 'secrets.put', name: 'TOKEN', value: 'v'}, actor: ACTOR})
    expect(outcome).toMatchObject({state: 'completed', acknowledged: false})
    const row = await t.store.outbox.get(outcome.outboxId)
    expect(row).toMatchObject({status: 'completed', last_error_code: 'control_receipt_ack_failed'})
    expect(row!.next_attempt_at).toBeGreaterThan(t.clock.now())

    // Not due yet: nothing claimed. Due, and the host answers something else: retried again.
    expect((await runPass(engine, {lanes: ['control_audit']})).lanes[0]).toMatchObject({claimed: 0})
    t.clock.advance(row!.next_attempt_at! - t.clock.now())
    proxy.rule = ({url}) => (url.endsWith('/ack') ? {kind: 'answer', status: 200, body: {acknowledged: 'yes'}} : {kind: 'forward'})
    expect((await runPass(engine, {lanes: ['control_audit']})).lanes[0]).toMatchObject({claimed: 1, retried: 1})
    proxy.rule = () => ({kind: 'forward'})
    t.clock.advance((await t.store.outbox.get(outcome.outboxId))!.next_attempt_at! - t.clock.now())
    expect((await runPass(engine, {lanes: ['control_audit']})).lanes[0]).toMatchObject({claimed: 1, completed: 1})
    expect(await t.store.outbox.get(outcome.outboxId)).toMatchObject({status: 'completed', next_attempt_at: null, last_error_code: null})
  })

  test('a receipt with an extra key, a wrong revision or a wrong last four is refused', async () => {
    const {engine, department, scriptName} = await deployed()
    proxy.rule = ({method, url}) => (method === 'POST' && url.endsWith('/api-key/rotate') ? {kind: 'forward_then_cut'} : {kind: 'forward'})
    const {outcome} = await applyControl(engine, {departmentId: department, request: {operation: 'access_policy.api_key.rotate'}, actor: ACTOR})
    expect(outcome.state).toBe('pending')
    proxy.rule = () => ({kind: 'forward'})
    const row = (await t.store.outbox.get(outcome.outboxId))!
    const payload = row.payload as unknown as ControlPayload
    const resolution = await engine.resolveProvider()
    if (resolution.status !== 'ready') throw new Error(resolution.message)
    const real = (await resolution.provider.getReceipt({mutationId: row.id, commandDigest: payload.commandDigest})) as Record<string, any>
    const expected = {mutationId: row.id, scriptName, payload}
    expect(validateReceipt(real, expected)).toMatchObject({noop: false, current: {mode: 'api_key', api_key_last_four: payload.command.lastFour}})

    const doctor = (change: (receipt: Record<string, any>) => void) => {
      const copy = structuredClone(real)
      change(copy)
      return copy
    }
    const extraKey = doctor((receipt) => (receipt.result.current.api_key = 'leaked'))
    expect(validateReceipt(extraKey, expected)).toEqual({problem: expect.stringContaining('receipt policy keys are')})
    expect(
      validateReceipt(
        doctor((receipt) => (receipt.extra = true)),
        expected,
      ),
    ).toEqual({problem: expect.stringContaining('receipt keys are')})
    expect(
      validateReceipt(
        doctor((receipt) => (receipt.result.current.revision += 1)),
        expected,
      ),
    ).toEqual({problem: expect.stringContaining('revision')})
    expect(
      validateReceipt(
        doctor((receipt) => (receipt.result.current.api_key_last_four = 'zzzz')),
        expected,
      ),
    ).toEqual({problem: expect.stringContaining('last four')})
    expect(
      validateReceipt(
        doctor((receipt) => (receipt.result.conflict = true)),
        expected,
      ),
    ).toEqual({problem: 'the receipt reports a conflict'})

    // Through the lane: the doctored receipt fails the row, nothing is completed or audited.
    proxy.rule = ({method, url}) => (method === 'GET' && url.startsWith('/v1/receipts/') ? {kind: 'answer', status: 200, body: extraKey} : {kind: 'forward'})
    t.clock.advance(engine.settings.control_audit.request_grace_seconds * 1000)
    expect((await runPass(engine, {lanes: ['control_audit']})).lanes[0]).toMatchObject({claimed: 1, failed: 1})
    expect(await t.store.outbox.get(row.id)).toMatchObject({status: 'failed', last_error_code: 'control_receipt_invalid'})
    expect(await t.store.audit.get(row.id)).toBeUndefined()
  })

  test("a retired Worker's rows settle without calling the host: recovery cancels, the ack round stops", async () => {
    const {engine, department, scriptName} = await deployed()
    // One row whose outcome is unknown, one completed row whose ack failed.
    proxy.rule = ({method}) => (method === 'PUT' ? {kind: 'forward_then_cut'} : {kind: 'forward'})
    const unknown = (await applyControl(engine, {departmentId: department, request: {operation: 'secrets.put', name: 'A', value: 'a'}, actor: ACTOR})).outcome
    proxy.rule = ({url}) => (url.endsWith('/ack') ? {kind: 'answer', status: 503, body: {code: 'internal_error', message: 'proxy'}} : {kind: 'forward'})
    const unacked = (await applyControl(engine, {departmentId: department, request: {operation: 'secrets.put', name: 'B', value: 'b'}, actor: ACTOR})).outcome
    expect([unknown.state, unacked.state]).toEqual(['pending', 'completed'])
    proxy.rule = () => ({kind: 'forward'})
    expect((await retireDepartment(engine, {departmentId: department})).state).toBe('retired')
    // Retirement purged what the v2.9 release held.
    const resolution = await engine.resolveProvider()
    if (resolution.status !== 'ready') throw new Error(resolution.message)
    expect(await resolution.provider.controlState(scriptName)).toMatchObject({secrets: [], serviceAccounts: []})

    t.clock.advance(engine.settings.control_audit.request_grace_seconds * 1000 + 3_600_000)
    proxy.seen.length = 0
    const lane = (await runPass(engine, {lanes: ['control_audit']})).lanes[0]!
    expect(lane).toMatchObject({claimed: 2, completed: 2, note: 'retired=1 ack_retired=1'})
    expect(proxy.seen.filter((call) => call.url.includes(unknown.outboxId) || call.url.includes(unacked.outboxId))).toEqual([])
    expect(await t.store.outbox.get(unknown.outboxId)).toMatchObject({
      status: 'cancelled',
      last_error_code: 'worker_retired',
      last_error: 'Worker retired before its control receipt was read',
    })
    expect(await t.store.audit.get(unknown.outboxId)).toBeUndefined()
    expect(await t.store.outbox.get(unacked.outboxId)).toMatchObject({
      status: 'completed',
      next_attempt_at: null,
      last_error_code: 'worker_retired',
      last_error: 'provider receipt retired with its Worker',
    })
  })
})
