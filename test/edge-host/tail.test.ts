// `edgeworkers tail` and the per-Worker figures against a real edge host running real workerd: a
// Worker that logs at each console level and throws on one path is deployed through the engine;
// its events reach live tails (several at once) through the signed streaming endpoint, filters
// apply, a redeploy keeps the stream, a host restart reconnects it; the per-Worker metrics move by
// exactly the requests sent; the Worker log file gets the same events; the CLI refuses bad input;
// past host.tail_max_events_per_second a tail gets `sampled` notices for what it did not get.
import {spawn} from 'node:child_process'
import {cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {applyControl} from '../../src/engine/control/apply.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {retireDepartment} from '../../src/engine/retire/retire-department.js'
import type {Engine} from '../../src/engine/context.js'
import {takeSnapshot} from '../../src/engine/status/snapshot.js'
import {tailWorker, type TailFilters, type TailNotice} from '../../src/engine/tail.js'
import {KitError} from '../../src/errors.js'
import {isTailEvent, type TailEvent, type TailSampled} from '../../src/protocol/tail.js'
import {CLI_BIN, runCli} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const ALL: TailFilters = {methods: [], samplingRate: 1}

describeStore('sqlite', 'tail and per-Worker metrics', (t) => {
  let host: TestHost
  let root: string
  let logFile: string
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-tail-'))
    logFile = path.join(root, 'workers.log')
    host = await startTestHost({settings: {shards: 1, worker_log_file: logFile}})
  })
  afterAll(async () => {
    await host?.stop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  /** A copy of the tail-logger fixture whose lines and exception name `release`. */
  function project(release: string): string {
    const dir = mkdtempSync(path.join(root, 'project-'))
    cpSync(path.join(FIXTURES_DIR, 'tail-logger'), dir, {recursive: true})
    const file = path.join(dir, 'index.js')
    writeFileSync(file, readFileSync(file, 'utf8').replace("const RELEASE = 'v1'", `const RELEASE = '${release}'`))
    return dir
  }

  /** A paired kit with one deployed tail-logger Worker. */
  async function deployed(): Promise<{engine: Engine; department: string; script: string}> {
    await kit.pair()
    const engine = await kit.engine()
    const department = await kit.department()
    const outcome = await deployWorker(engine, {projectDir: project('v1'), departmentId: department, wait: true})
    expect(outcome.state).toBe('completed')
    return {engine, department, script: outcome.scriptName}
  }

  /** A running tail: the events and the host's sampled notices it received so far, and how to stop it. */
  function startTail(engine: Engine, department: string, filters: TailFilters = ALL) {
    const events: TailEvent[] = []
    const sampled: TailSampled[] = []
    const notices: TailNotice[] = []
    const stop = new AbortController()
    const done = (async () => {
      for await (const line of tailWorker(engine, department, {filters, signal: stop.signal, onNotice: (notice) => notices.push(notice)})) {
        if (isTailEvent(line)) events.push(line)
        else sampled.push(line)
      }
    })()
    return {events, sampled, notices, stop: async () => (stop.abort(), done), done}
  }

  /** A per-Worker series of the host's /metrics (0 when absent). */
  const metricOf = async (script: string, name: string, labels: string) => {
    const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
    const line = text
      .split('\n')
      .find((candidate) => candidate.startsWith(`${name}{`) && candidate.includes(`script="${script}"`) && candidate.includes(labels))
    return line ? Number(line.split(' ').at(-1)) : 0
  }

  /** The tail Worker posts its counters every TAIL_SUMMARY_INTERVAL_MS: waits for the expected value. */
  const settled = async (script: string, name: string, labels: string, expected: number) => {
    const deadline = Date.now() + 15_000
    while ((await metricOf(script, name, labels)) !== expected && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
    return metricOf(script, name, labels)
  }

  const send = (script: string, pathname: string, init?: RequestInit) =>
    fetch(`${host.publicUrl}/${script}${pathname}`, init).then(async (response) => response.status)

  async function until(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  /** Sends /ready-N until the tail sees one (it subscribes asynchronously); returns how many were sent. */
  async function attached(script: string, tails: Array<{events: TailEvent[]}>): Promise<number> {
    for (let sent = 1; ; sent++) {
      await send(script, `/ready-${sent}`)
      try {
        await until(() => tails.every((tail) => tail.events.some((event) => event.path.startsWith('/ready-'))), 'the tail to attach', 500)
        return sent
      } catch {
        if (sent > 40) throw new Error('the tail never attached')
      }
    }
  }

  test('tail receives each console line with its level, and the uncaught exception with its stack; two tails at once', async () => {
    const {engine, department, script} = await deployed()
    const first = startTail(engine, department)
    const second = startTail(engine, department)
    await attached(script, [first, second])
    expect(await send(script, '/hello?x=1')).toBe(200)
    expect(await send(script, '/throw', {method: 'POST'})).toBe(500)
    for (const tail of [first, second]) await until(() => tail.events.some((event) => event.path === '/throw'), 'the exception event')
    await Promise.all([first.stop(), second.stop()])

    expect(first.notices).toEqual([{kind: 'tailing', script}])
    for (const tail of [first, second]) {
      const hello = tail.events.find((event) => event.path === '/hello?x=1')!
      expect(hello).toMatchObject({script, method: 'GET', status: 200, outcome: 'ok', exceptions: [], truncated: false})
      expect(hello.logs.map((line) => [line.level, line.message])).toEqual([
        ['debug', 'debug v1 /hello'],
        ['log', 'log v1 /hello {"n":1}'],
        ['info', 'info v1 /hello'],
        ['warn', 'warn v1 /hello'],
        ['error', 'error v1 /hello'],
      ])
      expect(Date.parse(hello.time)).not.toBeNaN()
      expect(hello.durationMs).toBeGreaterThanOrEqual(0)
      const thrown = tail.events.find((event) => event.path === '/throw')!
      expect(thrown).toMatchObject({method: 'POST', status: null, outcome: 'exception'})
      expect(thrown.logs).toHaveLength(5)
      expect(thrown.exceptions).toEqual([
        {time: expect.any(String), name: 'Error', message: 'tail fixture boom v1', stack: expect.stringContaining('index.js')},
      ])
    }
  })

  test('filters: status, method, search, sampling', async () => {
    const {engine, department, script} = await deployed()
    const errors = startTail(engine, department, {...ALL, status: 'error'})
    const posts = startTail(engine, department, {...ALL, methods: ['POST']})
    const search = startTail(engine, department, {...ALL, search: 'NEEDLE'})
    const none = startTail(engine, department, {...ALL, samplingRate: Number.MIN_VALUE})
    const everything = startTail(engine, department)
    // Every filtered tail lets /throw?needle (POST, an error, its path) through: it attaches them.
    for (let sent = 0; !errors.events.length || !posts.events.length || !search.events.length || !everything.events.length; sent++) {
      if (sent > 40) throw new Error('the tails never attached')
      await send(script, '/throw?needle', {method: 'POST'})
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    const before = {errors: errors.events.length, posts: posts.events.length, search: search.events.length}
    await send(script, '/plain')
    await send(script, '/fail')
    await send(script, '/with-needle', {method: 'PUT'})
    await send(script, '/last', {method: 'POST'})
    await until(() => everything.events.some((event) => event.path === '/last'), 'the last event')
    await until(() => posts.events.some((event) => event.path === '/last'), 'the last POST')
    await Promise.all([errors, posts, search, none, everything].map((tail) => tail.stop()))

    const paths = (events: TailEvent[], from: number) => events.slice(from).map((event) => event.path)
    expect(paths(errors.events, before.errors)).toEqual(['/fail'])
    expect(paths(posts.events, before.posts)).toEqual(['/last'])
    expect(paths(search.events, before.search)).toEqual(['/with-needle'])
    expect(none.events).toEqual([])
  })

  test('a redeploy in the middle keeps the stream; it follows the new release', async () => {
    const {engine, department, script} = await deployed()
    const tail = startTail(engine, department)
    await attached(script, [tail])
    const redeploy = await deployWorker(engine, {projectDir: project('v2'), departmentId: department, wait: true})
    expect(redeploy.state).toBe('completed')
    await send(script, '/after')
    await until(() => tail.events.some((event) => event.path === '/after'), 'the event of the new release')
    await tail.stop()
    expect(tail.events.find((event) => event.path === '/after')!.logs[0]!.message).toBe('debug v2 /after')
    expect(tail.notices.filter((notice) => notice.kind === 'reconnecting')).toEqual([])
  })

  test('a host restart: the tail reconnects and goes on', async () => {
    const {engine, department, script} = await deployed()
    const tail = startTail(engine, department)
    await attached(script, [tail])
    await host.restart()
    await until(() => tail.notices.some((notice) => notice.kind === 'reconnecting'), 'the reconnect notice')
    // Requests until the reconnected tail sees one (it attaches a moment after the host is back).
    for (let sent = 0; !tail.events.some((event) => event.path === '/after-restart'); sent++) {
      if (sent > 60) throw new Error('the tail never came back')
      await send(script, '/after-restart')
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    await tail.stop()
    expect(tail.events.find((event) => event.path === '/after-restart')).toMatchObject({status: 200, outcome: 'ok'})
  })

  test('per-Worker metrics move by exactly the requests sent, and go when the Worker is retired; the log file has the events', async () => {
    const {engine, department, script} = await deployed()
    const metric = (name: string, labels: string) => metricOf(script, name, labels)
    // A fresh Worker: every series starts at the requests sent to it.
    const tail = startTail(engine, department)
    const warmUp = await attached(script, [tail])
    expect(await settled(script, 'edgeworkers_host_worker_responses_total', 'status_class="2xx"', warmUp)).toBe(warmUp)
    expect(await metric('edgeworkers_host_worker_wall_seconds_count', '')).toBe(warmUp)
    for (let index = 0; index < 3; index++) await send(script, `/counted-${index}`)
    for (let index = 0; index < 2; index++) await send(script, '/throw')
    await until(() => tail.events.filter((event) => event.path === '/throw').length === 2, 'the two exceptions')
    await tail.stop()
    expect(await settled(script, 'edgeworkers_host_worker_responses_total', 'status_class="2xx"', warmUp + 3)).toBe(warmUp + 3)
    expect(await settled(script, 'edgeworkers_host_worker_responses_total', 'status_class="none"', 2)).toBe(2)
    expect(await settled(script, 'edgeworkers_host_worker_exceptions_total', '', 2)).toBe(2)
    expect(await settled(script, 'edgeworkers_host_worker_invocations_total', 'outcome="exception"', 2)).toBe(2)
    expect(await metric('edgeworkers_host_worker_invocations_total', 'outcome="ok"')).toBe(warmUp + 3)
    // Wall time is the data plane's: counted when the answer ended, before the client saw it.
    expect(await metric('edgeworkers_host_worker_wall_seconds_count', '')).toBe(warmUp + 5)

    const lines = readFileSync(logFile, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as TailEvent)
    const mine = lines.filter((event) => event.script === script && event.path.startsWith('/counted-'))
    expect(mine.map((event) => event.path)).toEqual(['/counted-0', '/counted-1', '/counted-2'])

    // The status snapshot (--json, and the Workers panel) names this Worker by department, with its two errors.
    const snapshot = await takeSnapshot(engine)
    expect(snapshot.workers?.workers.find((worker) => worker.script === script)).toMatchObject({
      department_id: department,
      errors: 2,
      lastError: 'Error: tail fixture boom v1',
      p99Ms: expect.any(Number),
    })

    // Retiring the Worker removes its series: the label set is bounded by the scripts served.
    await retireDepartment(engine, {departmentId: department, companyId: kit.companyId})
    const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
    expect(text.split('\n').filter((line) => line.startsWith('edgeworkers_host_worker_') && line.includes(script))).toEqual([])
    expect((await takeSnapshot(engine)).workers?.workers.map((worker) => worker.script)).not.toContain(script)
  })

  test('a TypeScript Worker with upload_source_maps: stacks in its events name the .ts file and line; its service-binding subrequests are counted exactly', async () => {
    const {engine, department: loggerDepartment, script: loggerScript} = await deployed()
    const dir = mkdtempSync(path.join(root, 'typescript-'))
    cpSync(path.join(FIXTURES_DIR, 'tail-typescript'), dir, {recursive: true})
    const config = path.join(dir, 'wrangler.toml')
    writeFileSync(config, readFileSync(config, 'utf8').replace('LOGGER_DEPARTMENT', loggerDepartment))
    const department = await kit.department()
    const outcome = await deployWorker(engine, {projectDir: dir, departmentId: department, wait: true})
    expect(outcome.state).toBe('completed')
    const script = outcome.scriptName

    const tail = startTail(engine, department)
    await attached(script, [tail])
    expect(await send(script, '/throw')).toBe(500)
    expect(await send(script, '/logged')).toBe(200)
    await until(() => tail.events.some((event) => event.path === '/logged'), 'the logged stack')
    await tail.stop()
    const thrown = tail.events.find((event) => event.path === '/throw')!
    expect(thrown.exceptions[0]).toMatchObject({name: 'Error', message: 'fail: typed boom'})
    // fail.ts line 4 throws; index.ts line 10 calls it. The bundle's own name (index.js) is gone.
    expect(thrown.exceptions[0]!.stack).toMatch(/at fail \(fail\.ts:4:\d+\)/)
    expect(thrown.exceptions[0]!.stack).toMatch(/index\.ts:10:\d+\)/)
    expect(thrown.exceptions[0]!.stack).not.toContain('index.js')
    const logged = tail.events.find((event) => event.path === '/logged')!
    expect(logged.logs.map((line) => line.level)).toEqual(['error'])
    expect(logged.logs[0]!.message).toMatch(/^Error: logged boom\n\s+at \S+ \(index\.ts:12:\d+\)/)

    // Subrequests through the service binding: the caller's counter and the target's requests move by exactly 3.
    const subrequests = await metricOf(script, 'edgeworkers_host_worker_subrequests_total', 'kind="service_binding"')
    const loggerRequests = await metricOf(loggerScript, 'edgeworkers_host_worker_wall_seconds_count', '')
    expect(await send(script, '/call?n=3')).toBe(200)
    expect(await metricOf(script, 'edgeworkers_host_worker_subrequests_total', 'kind="service_binding"')).toBe(subrequests + 3)
    expect(await metricOf(loggerScript, 'edgeworkers_host_worker_wall_seconds_count', '')).toBe(loggerRequests + 3)
  })

  test("a gradual deployment maps each version's stacks through its own source maps", async () => {
    const {engine, department: loggerDepartment} = await deployed()
    /** A copy of the TypeScript Worker; moved: fail.ts throws at line 10 (the fixture's line 4), a statement before it on line 9. */
    const typescriptProject = (moved: boolean) => {
      const dir = mkdtempSync(path.join(root, 'typescript-'))
      cpSync(path.join(FIXTURES_DIR, 'tail-typescript'), dir, {recursive: true})
      const config = path.join(dir, 'wrangler.toml')
      writeFileSync(config, readFileSync(config, 'utf8').replace('LOGGER_DEPARTMENT', loggerDepartment))
      const before = `\n\n\n\n\n  if (reason === '') console.log('no reason')\n`
      if (moved)
        writeFileSync(
          path.join(dir, 'src', 'fail.ts'),
          `type Reason = string\n\nexport function fail(reason: Reason): never {\n${before}  throw new Error(\`fail: \${reason}\`)\n}\n`,
        )
      return dir
    }
    const department = await kit.department()
    const v1 = await deployWorker(engine, {projectDir: typescriptProject(false), departmentId: department, wait: true})
    const v2 = await deployWorker(engine, {projectDir: typescriptProject(true), departmentId: department, wait: true, percentage: 50})
    expect([v1.state, v2.state]).toEqual(['completed', 'completed'])
    const script = v1.scriptName
    const tail = startTail(engine, department)
    await attached(script, [tail])
    for (const version of [v1, v2]) {
      const headers = {'Cloudflare-Workers-Version-Overrides': `${script}="${version.versionId}"`}
      expect(await send(script, '/throw', {headers})).toBe(500)
    }
    const thrown = (version: {versionId: string}) => tail.events.find((event) => event.path === '/throw' && event.versionId === version.versionId)
    await until(() => thrown(v1) !== undefined && thrown(v2) !== undefined, "both versions' stacks")
    await tail.stop()
    // v1 (the release kept beside the new one) throws at fail.ts line 4, v2 at line 10: each through its own map
    // (v1's frame through v2's map would name line 9).
    expect(thrown(v1)!.exceptions[0]!.stack).toMatch(/at fail \(fail\.ts:4:\d+\)/)
    expect(thrown(v2)!.exceptions[0]!.stack).toMatch(/at fail \(fail\.ts:10:\d+\)/)
  })

  test('the CLI: `tail --format json` prints one event per line, pretty prints lines under the request; SIGINT ends both with exit 130 and one line; bad input is one line with its exit code', {
    timeout: 180_000,
  }, async () => {
    const {department, script} = await deployed()
    const settings = kit.settings()
    const env = {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined, EDGEWORKERS_STORE__URL: settings.store.url}
    const start = (format: string) => {
      const child = spawn(process.execPath, [CLI_BIN, 'tail', department, '--format', format, '--data-dir', settings.data_dir], {env})
      const output = {stdout: '', stderr: ''}
      child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()))
      child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()))
      return {child, output, exited: new Promise<number | null>((resolve) => child.once('exit', resolve))}
    }
    const json = start('json')
    const pretty = start('pretty')
    // Meanwhile, bad input: one line, the documented exit code, nothing written.
    const refused = [
      [['tail', 'no-such-department'], 5, /Worker no-such-department not found/],
      [['tail', 'x', '--sampling-rate', '2'], 2, /--sampling-rate 2: must be a number above 0 and at most 1/],
      [['tail', 'x', '--method', 'G E T'], 2, /--method G E T: not an HTTP method/],
    ] as const
    const emptyDir = path.join(root, 'cli-data')
    const refusals = Promise.all(
      refused.map(([args], index) => runCli([...args, '--data-dir', index === 0 ? settings.data_dir : emptyDir], {EDGEWORKERS_STORE__URL: settings.store.url})),
    )
    for (let sent = 0; !json.output.stdout.includes('/from-cli') || !pretty.output.stdout.includes('/from-cli'); sent++) {
      if (sent > 240) throw new Error(`the CLI tails never printed the request: ${json.output.stderr} ${pretty.output.stderr}`)
      await send(script, '/from-cli')
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    json.child.kill('SIGINT')
    pretty.child.kill('SIGINT')
    expect(await json.exited).toBe(130)
    expect(await pretty.exited).toBe(130)
    expect(json.output.stderr).toBe(`tailing ${script} (Ctrl-C to stop)\ninterrupted by SIGINT: the stream was closed; nothing was left\n`)
    const event = json.output.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as TailEvent)
      .find((candidate) => candidate.path === '/from-cli')!
    expect(event).toMatchObject({script, method: 'GET', status: 200, outcome: 'ok'})
    expect(event.logs.map((line) => line.level)).toEqual(['debug', 'log', 'info', 'warn', 'error'])
    // Not a terminal: no colours.
    expect(pretty.output.stdout).toMatch(/^\S+Z GET \/from-cli 200 ok \d+ms\n {2}\[debug\] debug v1 \/from-cli\n {2}\[log\] log v1 \/from-cli \{"n":1\}\n/m)
    expect(pretty.output.stdout).not.toContain('\u001b[')
    for (const [index, result] of (await refusals).entries()) {
      expect(result.code, result.stderr).toBe(refused[index]![1])
      expect(result.stderr.trim().split('\n')).toHaveLength(1)
      expect(result.stderr).toMatch(refused[index]![2])
      expect(result.stdout).toBe('')
    }
    expect(existsSync(emptyDir)).toBe(false)
  })

  test("the Worker's secret values never reach a tail or the log file", async () => {
    const {engine, department, script} = await deployed()
    const secret = 'sekrit-value-1234'
    await applyControl(engine, {
      departmentId: department,
      request: {operation: 'secrets.put', name: 'TOKEN', value: secret},
      actor: {type: 'operator', id: 'test'},
    })
    const tail = startTail(engine, department)
    // The shard restarts with the secret: until then the Worker logs "token undefined".
    for (let sent = 0; !tail.events.some((event) => event.logs.some((line) => line.message === 'token [redacted]')); sent++) {
      if (sent > 60) throw new Error('the Worker never logged its secret')
      await send(script, `/secret?echo=${secret}`)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    await tail.stop()
    const event = tail.events.find((candidate) => candidate.logs.some((line) => line.message === 'token [redacted]'))!
    expect(event.path).toBe('/secret?echo=[redacted]')
    expect(JSON.stringify(tail.events)).not.toContain(secret)
    expect(readFileSync(logFile, 'utf8')).not.toContain(secret)
  })

  test('an unknown Worker is refused before any streaming (not_found)', async () => {
    const {engine} = await deployed()
    const refusal = await tailWorker(engine, 'no-such-department', {filters: ALL, signal: new AbortController().signal})
      [Symbol.asyncIterator]()
      .next()
      .then(
        () => null,
        (error: unknown) => error,
      )
    expect(refusal).toBeInstanceOf(KitError)
    expect((refusal as KitError).code).toBe('not_found')
  })

  // Last: it restarts the host without the log file (which takes every event, so nothing is sampled).
  test('sampling: past host.tail_max_events_per_second a tail gets a `sampled` notice for the rest; the metrics count every request', async () => {
    const cap = 5
    const burst = 60
    await host.restart({worker_log_file: '', tail_max_events_per_second: cap})
    const {engine, department, script} = await deployed()
    const tail = startTail(engine, department)
    const warmUp = await attached(script, [tail])
    const startedAt = Date.now()
    const statuses = await Promise.all(Array.from({length: burst}, (_, index) => send(script, `/burst-${index}`)))
    const seconds = (Date.now() - startedAt) / 1000
    expect(statuses.filter((status) => status !== 200)).toEqual([])
    const received = () => tail.events.filter((event) => event.path.startsWith('/burst-')).length
    const skipped = () => tail.sampled.reduce((sum, notice) => sum + notice.skipped, 0)
    await until(() => received() + skipped() === burst, 'every request of the burst received or counted as sampled out')
    await tail.stop()
    // At most `cap` per one-second window of the tail Worker; the burst spanned at most ⌈seconds⌉ + 1 windows.
    expect(received()).toBeLessThanOrEqual(cap * (Math.ceil(seconds) + 1))
    expect(skipped()).toBeGreaterThan(0)
    for (const notice of tail.sampled)
      expect(notice).toEqual({type: 'sampled', time: expect.any(String), script, skipped: expect.any(Number), maxEventsPerSecond: cap})
    // Every event a tail got is whole; sampling leaves out events, never parts of one.
    for (const event of tail.events.filter((candidate) => candidate.path.startsWith('/burst-'))) expect(event.logs).toHaveLength(5)
    expect(await settled(script, 'edgeworkers_host_worker_responses_total', 'status_class="2xx"', warmUp + burst)).toBe(warmUp + burst)
    expect(await metricOf(script, 'edgeworkers_host_worker_invocations_total', 'outcome="ok"')).toBe(warmUp + burst)
  })
})
