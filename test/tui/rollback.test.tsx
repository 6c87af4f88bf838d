// The status view's rollback against a real edge host running real workerd, on both stores: b on a
// Worker, y, and the version served before serves again — through the same rollback as the command.
import path from 'node:path'
import {cleanup, render} from 'ink-testing-library'
import {afterAll, afterEach, beforeAll, expect, test} from 'vitest'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {engineStatusSource} from '../../src/engine/status/source.js'
import {StatusApp} from '../../src/tui/status-app.js'
import {startTestHost, type TestHost} from '../support/host.js'
import {KitHarness} from '../support/kit.js'
import {describeEachStore} from '../support/stores.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'
import {KEYS, waitForFrame} from './support.js'

afterEach(() => cleanup())

describeEachStore('status view rollback', (t) => {
  let host: TestHost
  const kit = new KitHarness(t, () => host)

  beforeAll(async () => {
    host = await startTestHost()
  })
  afterAll(async () => {
    await host?.stop()
  })

  test('b, then y: the Worker serves the version served before again, audited as the operator', async () => {
    await kit.pair()
    const engine = await kit.engine()
    const department = await kit.department()
    const first = await deployWorker(engine, {projectDir: path.join(FIXTURES_DIR, 'hello'), departmentId: department, wait: true})
    const second = await deployWorker(engine, {projectDir: path.join(FIXTURES_DIR, 'hello-v2'), departmentId: department, wait: true})
    expect([first.state, second.state]).toEqual(['completed', 'completed'])

    const source = engineStatusSource(async () => engine, {type: 'operator', id: 'alice'})
    const {lastFrame, stdin} = render(<StatusApp source={source} intervalMs={200} />)
    await waitForFrame(lastFrame, '[Leased 0]')
    stdin.write(KEYS.tab)
    stdin.write(KEYS.tab)
    await waitForFrame(lastFrame, '[Workers 1]')
    stdin.write('b')
    await waitForFrame(lastFrame, '[y/N]')
    stdin.write('y')
    const done = `Worker of ${department} rolled back to ${first.versionId}: completed`
    await waitForFrame(lastFrame, (text) => text.replace(/\s+/g, ' ').includes(done), 120_000) // a long line wraps
    expect(await (await fetch(`${host.publicUrl}/${first.scriptName}/`)).text()).toBe('Hello from an Edge Worker! (GET /)\n')
    expect((await t.store.audit.list({action: 'edge_worker.rolled_back'})).map((row) => row.actor_id)).toEqual(['alice'])
  }, 180_000)
})
