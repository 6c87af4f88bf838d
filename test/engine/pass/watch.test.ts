// `reconcile --watch`: passes on a fixed cadence, never two at once (a tick that finds one running
// is skipped and logged), stopped cleanly by an abort. Ticks are driven by fake interval timers.
import {afterEach, expect, test, vi} from 'vitest'
import {watchPasses, type PassResult} from '../../../src/engine/pass/index.js'
import {overlapMessage} from '../../../src/engine/pass/watch.js'
import {describeEachStore} from '../../support/stores.js'
import {enqueueDeployRow, passEngine, recordingDispatch, seedWorker} from './support.js'

afterEach(() => {
  vi.useRealTimers()
})

/** The pass reported (onPass ran); the watch loop marks it finished right after. */
async function passFinished(reported: Promise<void>): Promise<void> {
  await reported
  await new Promise((resolve) => setImmediate(resolve))
}

test('the overlap line uses the reference wording for the host reconcile loop', () => {
  expect(overlapMessage(undefined)).toBe('Edge Worker host reconcile skipped: the previous pass is still running')
  expect(overlapMessage(['recovery', 'host_reconcile'])).toBe('Edge Worker host reconcile skipped: the previous pass is still running')
  expect(overlapMessage(['recovery'])).toBe('Edge Worker reconcile skipped: the previous pass is still running')
})

describeEachStore('reconcile --watch', (t) => {
  test('never starts a pass while the previous one runs, logs each skipped tick, and stops cleanly when aborted', async () => {
    vi.useFakeTimers({toFake: ['setInterval', 'clearInterval']})
    const engine = await passEngine(t)
    await enqueueDeployRow(engine, await seedWorker(t))

    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    let started!: () => void
    const dispatching = new Promise<void>((resolve) => (started = resolve))
    const dispatch = recordingDispatch(async (args) => {
      started()
      await held
      return {outcome: 'completed', versionId: 'v', releaseGeneration: 'rg', scriptName: args.outboxId, reconciled: false}
    })
    const passes: PassResult[] = []
    let passDone!: () => void
    let nextPass = new Promise<void>((resolve) => (passDone = resolve))
    const stop = new AbortController()
    const watching = watchPasses(engine, {
      lanes: ['recovery'],
      dispatchDeploy: dispatch,
      intervalMs: 1_000,
      signal: stop.signal,
      onPass: (result) => {
        passes.push(result)
        passDone()
      },
    })

    await dispatching // the first pass started at once and is inside its dispatch
    vi.advanceTimersByTime(1_000)
    vi.advanceTimersByTime(1_000)
    expect(engine.log.messages('warn')).toEqual([
      'Edge Worker reconcile skipped: the previous pass is still running',
      'Edge Worker reconcile skipped: the previous pass is still running',
    ])
    expect(passes).toEqual([])

    release()
    await passFinished(nextPass)
    expect(passes.map((pass) => pass.lanes[0]!.completed)).toEqual([1])
    nextPass = new Promise<void>((resolve) => (passDone = resolve))
    vi.advanceTimersByTime(1_000)
    await passFinished(nextPass)
    expect(passes).toHaveLength(2)

    stop.abort()
    await watching
    vi.advanceTimersByTime(10_000)
    expect(passes).toHaveLength(2)
    expect(dispatch.calls).toHaveLength(1)
    expect(engine.log.messages('warn')).toHaveLength(2)
  })

  test('a pass that throws is logged and the next tick runs again', async () => {
    vi.useFakeTimers({toFake: ['setInterval', 'clearInterval']})
    let calls = 0
    const engine = await passEngine(t, {
      resolution: async () => {
        calls++
        throw new Error('connect ECONNREFUSED')
      },
    })
    const stop = new AbortController()
    let failed!: () => void
    let nextFailure = new Promise<void>((resolve) => (failed = resolve))
    const error = engine.log.error
    engine.log.error = (fields, message) => {
      error(fields, message)
      failed()
    }
    const watching = watchPasses(engine, {intervalMs: 5_000, signal: stop.signal, onPass: () => {}})
    await passFinished(nextFailure)
    nextFailure = new Promise<void>((resolve) => (failed = resolve))
    vi.advanceTimersByTime(5_000)
    await passFinished(nextFailure)
    stop.abort()
    await watching
    expect(calls).toBe(2)
    expect(engine.log.messages('error')).toEqual([
      'Edge Worker reconcile pass failed: the reconcile pass could not start: connect ECONNREFUSED',
      'Edge Worker reconcile pass failed: the reconcile pass could not start: connect ECONNREFUSED',
    ])
  })
})
