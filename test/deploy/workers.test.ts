// Workers as people write them, deployed to a real edge host (two workerd shards) and exercised over
// real HTTP and WebSocket: every module type and a bare-name module, vars and static data,
// nodejs_compat and nodejs_als, a Durable Object chat room with two WebSocket clients, a service
// binding across shards that survives its target's redeploy, and every refusal — at build time
// (exit 2), at enqueue (exit 6) and by the host (exit 8) — with nothing written. Deploys go through
// the engine the CLI calls, in-process (a CLI process per deploy costs seconds on a loaded machine);
// each kind of outcome also goes through the CLI once, for its exit code and its one line.
// The subject is the host and the runtime, so one store backend is enough (SQLite).
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {Agent, WebSocket} from 'undici'
import {afterAll, beforeAll, beforeEach, expect, test} from 'vitest'
import {KitError} from '../../src/errors.js'
import {buildVersion} from '../../src/engine/project/build.js'
import {deployWorker, type DeployOutcome} from '../../src/engine/deploy/deploy-worker.js'
import {paths} from '../support/paths.js'
import {scriptNameFor} from '../../src/store/index.js'
import {runCli, type CliResult} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const COMPANY = 'acme'
/** Department ids by fixture; the gateway fixture binds AUTH to `acme-auth`. */
const DEPARTMENTS = {
  modules: 'acme-modules',
  'node-compat': 'acme-node',
  als: 'acme-als',
  'chat-room': 'acme-chat',
  'auth-service': 'acme-auth',
  gateway: 'acme-gateway',
}
type Fixture = keyof typeof DEPARTMENTS
const script = (fixture: Fixture) => scriptNameFor(COMPANY, DEPARTMENTS[fixture])
const UUID = '3f2b9c1e-1234-4abc-8def-0123456789ab'

describeStore('sqlite', 'Workers as people write them', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-workers-'))
  const scratch = mkdtempSync(path.join(tmpdir(), 'edgeworkers-workers-projects-'))
  const cli = (...args: string[]) => runCli([...args, '--data-dir', dataDir], {EDGEWORKERS_STORE__URL: t.url})

  async function tenants(): Promise<void> {
    if (!(await t.store.tenants.getCompany(COMPANY))) await t.store.tenants.createCompany({id: COMPANY, name: 'Acme'})
    for (const id of [...Object.values(DEPARTMENTS), 'acme-idle', 'acme-retired']) {
      if (!(await t.store.tenants.getDepartment(id))) await t.store.tenants.createDepartment({id, company_id: COMPANY, name: id})
    }
    if (!(await t.store.tenants.getCompany('globex'))) await t.store.tenants.createCompany({id: 'globex', name: 'Globex'})
    if (!(await t.store.tenants.getDepartment('globex-auth'))) await t.store.tenants.createDepartment({id: 'globex-auth', company_id: 'globex', name: 'auth'})
  }

  async function deploy(project: string, department: string): Promise<DeployOutcome> {
    return deployWorker(await kit.engine({deploy: {readiness_probe_interval_ms: 50}}), {projectDir: project, departmentId: department, wait: true})
  }

  async function deployFixture(fixture: Fixture, {viaCli = false} = {}): Promise<void> {
    const project = path.join(FIXTURES_DIR, fixture)
    if (viaCli) {
      const result = await cli('deploy', project, '--department', DEPARTMENTS[fixture], '--json')
      if (result.code !== 0) throw new Error(`deploy of ${fixture} exited ${result.code}: ${result.stdout}${result.stderr}`)
      expect(JSON.parse(result.stdout)).toMatchObject({state: 'completed', scriptName: script(fixture)})
    } else {
      const outcome = await deploy(project, DEPARTMENTS[fixture])
      if (outcome.state !== 'completed') throw new Error(`deploy of ${fixture} ended ${outcome.state}: ${outcome.code} ${outcome.message}`)
    }
  }

  /** What building (or deploying) a project refuses with. */
  async function refusal(attempt: Promise<unknown>): Promise<KitError> {
    const error = await attempt.then(
      () => null,
      (caught: unknown) => caught,
    )
    expect(error).toBeInstanceOf(KitError)
    return error as KitError
  }

  /** A copy of a fixture under the scratch dir, its manifest changed by `edit`. */
  function project(fixture: string, edit: (manifest: Record<string, any>) => void, files: Record<string, string> = {}): string {
    const dir = mkdtempSync(path.join(scratch, `${fixture}-`))
    cpSync(path.join(FIXTURES_DIR, fixture), dir, {recursive: true})
    const manifest = JSON.parse(readFileSync(path.join(dir, 'edgeworker.json'), 'utf8'))
    edit(manifest)
    writeFileSync(path.join(dir, 'edgeworker.json'), JSON.stringify(manifest))
    for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text)
    return dir
  }

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 2}})
    await kit.pair()
    await tenants()
    // The service target first and alone, then its caller alone: each lands on the least loaded
    // shard, so the binding crosses shards. The rest deploy together.
    await deployFixture('auth-service')
    await deployFixture('gateway')
    await Promise.all([deployFixture('modules', {viaCli: true}), ...(['node-compat', 'als', 'chat-room'] as const).map((fixture) => deployFixture(fixture))])
  }, 180_000)
  afterAll(async () => {
    await host?.stop()
    rmSync(dataDir, {recursive: true, force: true})
    rmSync(scratch, {recursive: true, force: true})
  })
  beforeEach(async () => {
    await kit.pair()
    await tenants()
  })

  /** The management API, signed with the kit's pairing secret. */
  const admin = async () => host.client((await kit.pair()).shared_secret)

  const get = async (fixture: Fixture, rest = '/', init?: RequestInit) => {
    const response = await fetch(`${host.publicUrl}/${script(fixture)}${rest}`, init)
    return {status: response.status, headers: response.headers, text: await response.text()}
  }

  test('every module type, a bare-name module, vars and staticData reach the Worker', async () => {
    const response = await get('modules')
    expect(response.status).toBe(200)
    expect(JSON.parse(response.text)).toEqual({
      sum: 5,
      data: {kind: 'json module', items: [1, 2, 3]},
      helper: 42,
      greeting: 'hello from a text module',
      blob: [1, 2, 255],
      shout: 'BARE NAME!',
      env: ['GREETING', 'LIMITS', 'STATIC_DATA'],
      vars: {GREETING: 'hello from vars', LIMITS: {max: 3, tags: ['a', 'b']}},
      staticData: {region: 'eu', plans: ['free', 'pro']},
    })
    const details = (await (await admin()).call('GET', paths.script(script('modules')))).body
    expect(Object.fromEntries(details.modules.map((module: {name: string; type: string}) => [module.name, module.type]))).toEqual({
      'index.js': 'esModule',
      'add.wasm': 'wasm',
      'blob.bin': 'data',
      'data.json': 'json',
      'greeting.txt': 'text',
      'helper.cjs': 'commonJs',
      'streams-util': 'esModule',
    })
  })

  test('node:crypto, node:stream and node:events under nodejs_compat; AsyncLocalStorage under nodejs_als', async () => {
    const node = await get('node-compat', '/', {method: 'POST', body: 'abc'})
    expect(JSON.parse(node.text)).toEqual({sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', stream: 'abc', event: 42})
    const [first, second] = await Promise.all([get('als', '/?id=one'), get('als', '/?id=two')])
    expect([JSON.parse(first.text), JSON.parse(second.text)]).toEqual([{id: 'one'}, {id: 'two'}])
    expect((await (await admin()).call('GET', paths.script(script('node-compat')))).body.compatibilityFlags).toEqual(['nodejs_compat'])
  })

  test('the chat room: its HTML page is a text module; two WebSocket clients, one per routing form, talk through a Durable Object', async () => {
    const page = await get('chat-room')
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(page.text).toContain('<title>Chat room</title>')

    // The data plane counts each WebSocket the Worker accepts, labelled with the department the kit uploaded for.
    const accepted = async () => {
      const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
      const series = `edgeworkers_host_worker_websockets_total\\{script="${script('chat-room')}",department="${DEPARTMENTS['chat-room']}"\\}`
      return Number(new RegExp(`^${series} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)
    }
    const acceptedBefore = await accepted()
    const alice = await connect(`${wsUrl(host)}/${script('chat-room')}/?room=tea`)
    const bob = await connect(`ws://${script('chat-room')}.workers.localhost:${new URL(host.publicUrl).port}/?room=tea`, {dispatcher: loopback})
    expect(await alice.next()).toBe(JSON.stringify({joined: 1}))
    expect(await bob.next()).toBe(JSON.stringify({joined: 2}))
    alice.socket.send('hi bob')
    expect(await bob.next()).toBe('hi bob')
    bob.socket.send('hi alice')
    expect(await alice.next()).toBe('hi alice')
    alice.socket.close()
    bob.socket.close()
    expect(await accepted()).toBe(acceptedBefore + 2)
  })

  test('upgrades follow the plain-request rules: request id, 404 for unknown scripts, the access policy', async () => {
    const name = script('chat-room')
    const upgraded = await rawUpgrade(host, `/${name}/?room=ids`, {'x-request-id': UUID})
    expect(upgraded).toMatchObject({status: 101, requestId: UUID})
    const unknown = await rawUpgrade(host, `/${scriptNameFor(COMPANY, 'nobody')}/`, {'x-request-id': UUID})
    expect(unknown).toMatchObject({status: 404, requestId: UUID, body: {code: 'worker_not_found', message: 'Worker not found', requestId: UUID}})

    const client = await admin()
    const apiKey = 'k'.repeat(32)
    const digest = (await import('node:crypto')).createHash('sha256').update(apiKey).digest('hex')
    expect((await client.call('PUT', paths.accessPolicy(name), {mode: 'api_key', apiKeySha256: digest})).status).toBe(200)
    try {
      const denied = await rawUpgrade(host, `/${name}/?room=keys`)
      expect(denied).toMatchObject({status: 403, body: {code: 'access_denied'}})
      expect(denied.requestId).toMatch(/^[0-9a-f-]{36}$/)
      const allowed = await connect(`${wsUrl(host)}/${name}/?room=keys`, {headers: {'x-api-key': apiKey}})
      expect(await allowed.next()).toBe(JSON.stringify({joined: 1}))
      allowed.socket.close()
    } finally {
      await client.call('PUT', paths.accessPolicy(name), {mode: 'public'})
    }
  })

  test('a service binding reaches another department of the company on another shard, and survives the target redeploying', async () => {
    const inventory = (await (await admin()).call('GET', paths.inventory)).body as {scripts: Array<{name: string; shard: number}>}
    const shardOf = (fixture: Fixture) => inventory.scripts.find((entry) => entry.name === script(fixture))!.shard
    expect(shardOf('gateway')).not.toBe(shardOf('auth-service'))

    const call = async (query = '') => JSON.parse((await get('gateway', `/?token=t0k${query}`)).text)
    expect(await call()).toEqual({gateway: true, status: 200, auth: {service: 'auth', release: '1', path: '/verify', token: 't0k', method: 'POST'}})
    // A Worker cannot redirect its binding by setting the routing header itself.
    expect((await call(`&claim=${script('modules')}`)).auth).toMatchObject({service: 'auth'})
    // The binding bypasses the target's access policy: it was granted at enqueue, within the company.
    const client = await admin()
    await client.call('PUT', paths.accessPolicy(script('auth-service')), {mode: 'teamsync_internal', ipAllowlist: []})
    expect((await get('auth-service')).status).toBe(403)
    expect((await call()).auth.release).toBe('1')

    // The listener behind the bindings serves only what workerd names, by the same rules as the data plane.
    const direct = (headers: Record<string, string>) => unixRequest(path.join(host.dataDir, 'runtime', 'services.sock'), headers)
    expect(await direct({})).toMatchObject({status: 404, body: {code: 'worker_not_found'}})
    expect(await direct({'x-edgeworkers-service-target': scriptNameFor(COMPANY, 'nobody')})).toMatchObject({status: 404})
    expect(await direct({'x-edgeworkers-service-target': script('auth-service')})).toMatchObject({status: 200, body: {service: 'auth'}})

    const v2 = project('auth-service', (manifest) => (manifest.vars = {RELEASE: '2'}))
    expect((await deploy(v2, DEPARTMENTS['auth-service'])).state).toBe('completed')
    expect((await call()).auth.release).toBe('2')
  })

  test('a binding to another company, to a department without a Worker or to a retired Worker is refused at enqueue; nothing is written', async () => {
    const bound = (department: string) => project('gateway', (manifest) => (manifest.services = [{binding: 'AUTH', department}]))
    await t.exec(
      `insert into edge_workers (id, company_id, department_id, script_name, status, current_version_id, serving_scope, base_revision, created_at, updated_at, retired_at)
       values ('w-retired', '${COMPANY}', 'acme-retired', '${scriptNameFor(COMPANY, 'acme-retired')}', 'retired', 'v-gone', null, 0, 0, 0, 0)`,
    )
    const cases: Array<[string, string]> = [
      ['acme-idle', 'service binding AUTH: department acme-idle has no deployed Worker'],
      ['acme-retired', 'service binding AUTH: the Worker of department acme-retired is retired'],
      ['nowhere', 'service binding AUTH: department nowhere not found'],
    ]
    for (const [department, message] of cases) {
      expect(await refusal(deploy(bound(department), DEPARTMENTS.gateway))).toMatchObject({code: 'conflict', reason: 'service_binding_invalid', message})
    }
    oneLine(
      await cli('deploy', bound('globex-auth'), '--department', DEPARTMENTS.gateway),
      6,
      'error: service binding AUTH: department globex-auth belongs to another company',
    )
    expect(await t.store.outbox.list()).toEqual([])
    expect((await t.store.workers.list()).map((worker) => worker.id)).toEqual(['w-retired'])
  })

  test('build-time refusals: one line naming the problem, exit 2, nothing written', async () => {
    const helperWithSyntaxError = project('chat-room', (manifest) => manifest.modules.push('lib.js'), {
      'lib.js': 'export function f() {\n  return (1 +\n}\n',
      'index.js': `import {f} from 'lib.js'\n${readFileSync(path.join(FIXTURES_DIR, 'chat-room', 'index.js'), 'utf8')}`,
    })
    const cases: Array<[string, string | RegExp]> = [
      [
        path.join(FIXTURES_DIR, 'no-fetch'),
        'error: the Worker does not start under workerd: the main module index.js has no default export with a fetch handler',
      ],
      [helperWithSyntaxError, "error: the Worker does not start under workerd: lib.js:3: Uncaught SyntaxError: Unexpected token '}'"],
      [
        project('hello', (manifest) => (manifest.compatibilityFlags = ['nodejs_compat', 'no_such_flag'])),
        'error: edgeworker.json: key "compatibilityFlags": workerd has no compatibility flag "no_such_flag"',
      ],
      [
        project('hello', (manifest) => manifest.modules.push({path: 'index.js', name: 'x', kind: 'text'})),
        'error: edgeworker.json: unknown key "modules[1].kind"',
      ],
      [
        project('hello', (manifest) => manifest.modules.push('notes.yaml')),
        'error: edgeworker.json: key "modules[1]": the type of "notes.yaml" does not follow from its extension; give {"path", "type"}',
      ],
      [
        project('hello', (manifest) => (manifest.main = 'page.html'), {'page.html': '<p>'}),
        /^error: edgeworker\.json: key "main" \("page\.html"\) is not listed in "modules"$/,
      ],
      [
        project('hello', (manifest) => (manifest.vars = {STATIC_DATA: 'x'})),
        'error: edgeworker.json: key "vars.STATIC_DATA": the binding name "STATIC_DATA" is already taken by staticData',
      ],
      [
        project('gateway', (manifest) => (manifest.services[0].entrypoint = 'Admin')),
        'error: edgeworker.json: key "services[0].entrypoint" named entrypoints are not supported yet; bind the default export',
      ],
    ]
    const limits = (await kit.engine()).settings.deploy
    for (const [dir, message] of cases.slice(1)) {
      const error = await refusal(buildVersion(dir, limits))
      expect(error.code).toBe('usage')
      if (typeof message === 'string') expect(`error: ${error.message}`).toBe(message)
      else expect(`error: ${error.message}`).toMatch(message)
    }
    oneLine(await cli('deploy', cases[0]![0], '--department', 'acme-idle'), 2, cases[0]![1])
    expect(await t.store.outbox.list()).toEqual([])
    expect(await t.store.workers.list()).toEqual([])
  })

  test('an open WebSocket is closed when its shard swaps for a redeploy; the client reconnects to the new release', async () => {
    const url = `${wsUrl(host)}/${script('chat-room')}/?room=swap`
    const before = await connect(url)
    expect(await before.next()).toBe(JSON.stringify({joined: 1}))
    const changed = project('chat-room', () => {}, {'page.html': '<!doctype html><title>Chat room v2</title>'})
    expect((await deploy(changed, DEPARTMENTS['chat-room'])).state).toBe('completed')
    expect(await before.closed).toBe(1006)
    const after = await connect(url)
    expect(await after.next()).toBe(JSON.stringify({joined: 1}))
    after.socket.close()
    expect((await get('chat-room')).text).toContain('Chat room v2')
  })

  test('an experimental flag is refused at build for a host not in experimental mode (one line, exit 2, nothing written), and the Worker answers once the host is (under the loader too)', async () => {
    const experimental = project('hello', (manifest) => (manifest.compatibilityFlags = ['experimental']))
    const [outboxBefore, workersBefore] = [await t.store.outbox.list(), await t.store.workers.list()]
    const refused = await cli('deploy', experimental, '--department', 'acme-idle')
    oneLine(
      refused,
      2,
      "error: the Worker does not start under workerd: compatibility flag experimental needs workerd's experimental mode, which this host does not run; start it with --experimental (setting host.experimental = true) to allow it",
    )
    expect(await t.store.outbox.list()).toEqual(outboxBefore)
    expect(await t.store.workers.list()).toEqual(workersBefore)
    await host.restart({experimental: true})
    expect((await deploy(experimental, 'acme-idle')).state).toBe('completed')
    const answer = await fetch(`${host.publicUrl}/${scriptNameFor(COMPANY, 'acme-idle')}/x`)
    expect({status: answer.status, text: await answer.text()}).toEqual({status: 200, text: 'Hello from an Edge Worker! (GET /x)\n'})
  })
})

function oneLine(result: CliResult, code: number, message: string | RegExp): void {
  expect({code: result.code, stdout: result.stdout}).toEqual({code, stdout: ''})
  const line = result.stderr.trimEnd()
  expect(line.split('\n')).toHaveLength(1)
  if (typeof message === 'string') expect(line).toBe(message)
  else expect(line).toMatch(message)
}

function wsUrl(host: TestHost): string {
  return host.publicUrl.replace(/^http/, 'ws')
}

/** Resolves every name to loopback: `<script>.workers.localhost` reaches the test host. */
const loopback = new Agent({
  connect: {
    lookup: ((_hostname: string, options: {all?: boolean}, callback: (...args: unknown[]) => void) =>
      options.all ? callback(null, [{address: '127.0.0.1', family: 4}]) : callback(null, '127.0.0.1', 4)) as never,
  },
})

interface Connection {
  socket: WebSocket
  /** The next message not yet taken. */
  next(): Promise<string>
  /** The close code once the connection closes. */
  closed: Promise<number>
}

function connect(url: string, init: {headers?: Record<string, string>; dispatcher?: Agent} = {}): Promise<Connection> {
  const socket = new WebSocket(url, init as never)
  const queue: string[] = []
  const waiting: Array<(message: string) => void> = []
  socket.addEventListener('message', (event) => {
    const message = String(event.data)
    const taker = waiting.shift()
    if (taker) taker(message)
    else queue.push(message)
  })
  const closed = new Promise<number>((resolve) => socket.addEventListener('close', (event) => resolve(event.code)))
  return new Promise((resolve, reject) => {
    socket.addEventListener('open', () =>
      resolve({
        socket,
        closed,
        next: () => (queue.length > 0 ? Promise.resolve(queue.shift()!) : new Promise((take) => waiting.push(take))),
      }),
    )
    socket.addEventListener('error', () => reject(new Error(`WebSocket to ${url} failed`)))
  })
}

function unixRequest(socketPath: string, headers: Record<string, string>): Promise<{status: number; body: any}> {
  return new Promise((resolve, reject) => {
    const request = http.request({socketPath, path: '/', headers}, async (response) => {
      let text = ''
      for await (const chunk of response) text += chunk
      resolve({status: response.statusCode!, body: JSON.parse(text)})
    })
    request.once('error', reject)
    request.end()
  })
}

/** An upgrade request by hand, to see the answer a WebSocket client hides: status, request id, body. */
function rawUpgrade(host: TestHost, target: string, headers: Record<string, string> = {}): Promise<{status: number; requestId: string; body?: any}> {
  const {hostname, port} = new URL(host.publicUrl)
  return new Promise((resolve, reject) => {
    const request = http.request({
      host: hostname,
      port,
      path: target,
      headers: {connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers},
    })
    request.once('upgrade', (response, socket) => {
      socket.destroy()
      resolve({status: response.statusCode!, requestId: String(response.headers['x-request-id'])})
    })
    request.once('response', async (response) => {
      let text = ''
      for await (const chunk of response) text += chunk
      resolve({status: response.statusCode!, requestId: String(response.headers['x-request-id']), body: JSON.parse(text)})
    })
    request.once('error', reject)
    request.end()
  })
}
