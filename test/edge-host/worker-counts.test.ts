// Workers nobody traces (issue 35): with no live tail and no Worker log file, a Worker on its own socket runs behind the
// counting main module instead of handing workerd's traces to the tail Worker. Against a real edge host running real
// workerd: its per-Worker metrics and the status snapshot's last error count exactly what was sent (fetch throws, a
// ctx.waitUntil rejection); a tail sees its requests and console lines through the shard's loader, with no new process;
// under code_loading = "restart" a tail's arrival swaps the shard to a process that traces the Worker.
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {WebSocket} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import type {Engine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {takeSnapshot} from '../../src/engine/status/snapshot.js'
import {tailWorker} from '../../src/engine/tail.js'
import {isTailEvent, type TailEvent} from '../../src/protocol/tail.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

describeStore('sqlite', 'per-Worker counts without a tail Worker', (t) => {
  let host: TestHost
  let root: string
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-counts-'))
    // Deployed into a running shard, the Worker is in the loader (traced there) until the settle puts it on its own socket.
    host = await startTestHost({settings: {shards: 1, loader_settle_seconds: 1}})
  })
  afterAll(async () => {
    await host?.stop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  /** The tail-logger fixture, with a path whose ctx.waitUntil promise rejects. */
  function project(): string {
    const dir = mkdtempSync(path.join(root, 'project-'))
    cpSync(path.join(FIXTURES_DIR, 'tail-logger'), dir, {recursive: true})
    const file = path.join(dir, 'index.js')
    const source = readFileSync(file, 'utf8')
      .replace('async fetch(request, env) {', 'async fetch(request, env, ctx) {')
      .replace(
        "if (pathname === '/throw')",
        "if (pathname === '/later') ctx.waitUntil(Promise.reject(new Error('later boom')))\n    if (pathname === '/throw')",
      )
    writeFileSync(file, source)
    return dir
  }

  const metrics = async () => (await fetch(`${host.adminUrl}/metrics`)).text()
  const seriesOf = (text: string, name: string, labels: string, script?: string) => {
    const line = text
      .split('\n')
      .find((candidate) => candidate.startsWith(`${name}{`) && (!script || candidate.includes(`script="${script}"`)) && candidate.includes(labels))
    return line ? Number(line.split(' ').at(-1)) : 0
  }
  async function until(condition: () => Promise<boolean> | boolean, what: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!(await condition())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  const swaps = async (reason: string) => seriesOf(await metrics(), 'edgeworkers_host_shard_restarts_total', `reason="${reason}"`)
  /** A running tail of the department's Worker: the events it received so far. */
  function startTail(engine: Engine, department: string) {
    const events: TailEvent[] = []
    const stop = new AbortController()
    const done = (async () => {
      for await (const line of tailWorker(engine, department, {filters: {methods: [], samplingRate: 1}, signal: stop.signal}))
        if (isTailEvent(line)) events.push(line)
    })()
    return {events, stop: async () => (stop.abort(), done)}
  }
  const send = (script: string, pathname: string) => fetch(`${host.publicUrl}/${script}${pathname}`).then((response) => response.status)

  test('counted exactly with nobody tailing; a tail sees its requests through the loader, no swap; counted exactly after it', async () => {
    await kit.pair()
    const engine = await kit.engine()
    const department = await kit.department()
    const outcome = await deployWorker(engine, {projectDir: project(), departmentId: department, wait: true})
    expect(outcome.state).toBe('completed')
    const script = outcome.scriptName
    await until(async () => (await swaps('settle')) >= 1, 'the settle swap')
    const metric = async (name: string, labels: string) => seriesOf(await metrics(), name, labels, script)

    // On its own socket, nobody tailing: the counting main module counts (no trace is made).
    for (let index = 0; index < 3; index++) expect(await send(script, `/counted-${index}`)).toBe(200)
    for (let index = 0; index < 2; index++) expect(await send(script, '/throw')).toBe(500)
    expect(await send(script, '/later')).toBe(200)
    await until(async () => (await metric('edgeworkers_host_worker_exceptions_total', '')) === 3, 'three exceptions')
    expect(await metric('edgeworkers_host_worker_responses_total', 'status_class="2xx"')).toBe(4)
    expect(await metric('edgeworkers_host_worker_responses_total', 'status_class="none"')).toBe(2)
    expect(await metric('edgeworkers_host_worker_invocations_total', 'outcome="exception"')).toBe(2)
    expect(await metric('edgeworkers_host_worker_invocations_total', 'outcome="ok"')).toBe(4)
    const snapshot = await takeSnapshot(engine)
    expect(snapshot.workers?.workers.find((worker) => worker.script === script)).toMatchObject({errors: 2, lastError: 'Error: later boom'})
    expect(await swaps('traces')).toBe(0)

    // A tail: no new process; its requests reach the tail through the shard's loader, which traces them.
    const tail = startTail(engine, department)
    await until(async () => {
      await send(script, '/tailed')
      return tail.events.some((event) => event.path === '/tailed')
    }, 'the tail to see a request')
    expect(tail.events.find((event) => event.path === '/tailed')?.logs.map((line) => line.message)).toContain('info v1 /tailed')
    await tail.stop()
    expect(await swaps('traces')).toBe(0)
    // Tailed requests were counted once each: by the tail Worker's traces or by the counting main module.
    const exceptions = await metric('edgeworkers_host_worker_exceptions_total', '')
    expect(await send(script, '/throw')).toBe(500)
    await until(async () => (await metric('edgeworkers_host_worker_exceptions_total', '')) === exceptions + 1, 'the exception counted')
  })

  test('a WorkerEntrypoint class as the default export is counted too, and keeps its env', async () => {
    await kit.pair()
    const engine = await kit.engine()
    const department = await kit.department()
    const dir = mkdtempSync(path.join(root, 'class-'))
    cpSync(path.join(FIXTURES_DIR, 'tail-logger'), dir, {recursive: true})
    writeFileSync(
      path.join(dir, 'index.js'),
      `import {WorkerEntrypoint} from 'cloudflare:workers'
export default class extends WorkerEntrypoint {
  fetch(request) {
    if (new URL(request.url).pathname === '/throw') throw new TypeError('class boom')
    return new Response(typeof this.env)
  }
}
`,
    )
    const settles = await swaps('settle')
    const outcome = await deployWorker(engine, {projectDir: dir, departmentId: department, wait: true})
    const script = outcome.scriptName
    await until(async () => (await swaps('settle')) > settles, 'the settle swap')
    expect(await (await fetch(`${host.publicUrl}/${script}/`)).text()).toBe('object')
    expect(await send(script, '/throw')).toBe(500)
    await until(async () => seriesOf(await metrics(), 'edgeworkers_host_worker_exceptions_total', '', script) === 1, 'the exception counted')
    expect(seriesOf(await metrics(), 'edgeworkers_host_worker_invocations_total', 'outcome="ok"', script)).toBe(1)
    const snapshot = await takeSnapshot(engine)
    expect(snapshot.workers?.workers.find((worker) => worker.script === script)?.lastError).toBe('TypeError: class boom')
  })

  test("a tailed Worker's WebSocket through the loader: upgraded there, its headers the client's, seen by the tail", async () => {
    await kit.pair()
    const engine = await kit.engine()
    const department = await kit.department()
    const dir = mkdtempSync(path.join(root, 'socket-'))
    cpSync(path.join(FIXTURES_DIR, 'tail-logger'), dir, {recursive: true})
    writeFileSync(
      path.join(dir, 'index.js'),
      `export default {
  fetch(request) {
    if (request.headers.get('upgrade') !== 'websocket') return new Response('plain')
    const [client, server] = Object.values(new WebSocketPair())
    server.accept()
    server.send(JSON.stringify([...request.headers.keys()]))
    return new Response(null, {status: 101, webSocket: client})
  },
}
`,
    )
    const settles = await swaps('settle')
    const script = (await deployWorker(engine, {projectDir: dir, departmentId: department, wait: true})).scriptName
    await until(async () => (await swaps('settle')) > settles, 'the settle swap')
    const tail = startTail(engine, department)
    await until(async () => {
      await send(script, '/attach')
      return tail.events.some((event) => event.path === '/attach')
    }, 'the tail to attach')
    const socket = new WebSocket(`${host.publicUrl.replace('http', 'ws')}/${script}/socket`)
    const headers = await new Promise<string[]>((resolve, reject) => {
      socket.addEventListener('message', (event) => resolve(JSON.parse(String(event.data)) as string[]))
      socket.addEventListener('error', reject)
    })
    socket.close()
    expect(headers).toContain('x-request-id')
    expect(headers.filter((name) => name.startsWith('x-edgeworkers-'))).toEqual([])
    await until(
      () => tail.events.some((event) => event.path === '/socket'),
      `the tail to see the upgrade: ${JSON.stringify(tail.events.map((event) => [event.path, event.status]))}`,
    )
    await tail.stop()
  })

  test('code_loading = "restart": a tail swaps the shard to a process tracing the Worker before its stream opens', async () => {
    const restartHost = await startTestHost({settings: {shards: 1, code_loading: 'restart'}})
    try {
      const restartKit = new KitHarness(t, () => restartHost)
      await restartKit.pair()
      const engine = await restartKit.engine()
      const department = await restartKit.department()
      const outcome = await deployWorker(engine, {projectDir: project(), departmentId: department, wait: true})
      const script = outcome.scriptName
      const restartSwaps = async () =>
        seriesOf(await (await fetch(`${restartHost.adminUrl}/metrics`)).text(), 'edgeworkers_host_shard_restarts_total', 'reason="traces"')
      expect(await restartSwaps()).toBe(0)
      const tail = startTail(engine, department)
      await until(async () => (await restartSwaps()) === 1, 'the traces swap')
      await until(async () => {
        await fetch(`${restartHost.publicUrl}/${script}/tailed`)
        return tail.events.some((event) => event.path === '/tailed')
      }, 'the tail to see a request')
      await tail.stop()
    } finally {
      await restartHost.stop()
    }
  })
})
