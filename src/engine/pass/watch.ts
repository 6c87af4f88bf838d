// `reconcile --watch`: a pass on a fixed cadence, but never two at once. A tick that finds the
// previous pass still running is skipped and logged (`… skipped: the previous pass is still running`). Aborting stops the ticks; the running pass stops between rows and is awaited.
import type {Engine} from '../context.js'
import type {LaneName} from './lane.js'
import {messageOf} from '../../errors.js'
import {runPass, type PassOptions, type PassResult} from './run-pass.js'

export interface WatchOptions extends PassOptions {
  intervalMs: number
  signal: AbortSignal
  /** Called with every finished pass (print it, write metrics); an error it throws is logged. */
  onPass(result: PassResult): Promise<void> | void
}

export function overlapMessage(lanes: readonly LaneName[] | undefined): string {
  // Named after the host reconcile loop when it takes part: it is the one that ticks faster than it may run.
  const subject = !lanes || lanes.includes('host_reconcile') ? 'host reconcile' : 'reconcile'
  return `Edge Worker ${subject} skipped: the previous pass is still running`
}

export function watchPasses(engine: Engine, options: WatchOptions): Promise<void> {
  const {intervalMs, signal, onPass, ...passOptions} = options
  return new Promise((resolve) => {
    let running: Promise<void> | undefined
    const tick = () => {
      if (signal.aborted) return
      if (running !== undefined) {
        engine.log.warn({lanes: passOptions.lanes ?? 'all'}, overlapMessage(passOptions.lanes))
        return
      }
      running = runPass(engine, {...passOptions, signal})
        .then((result) => onPass(result))
        .catch((error: unknown) => engine.log.error({err: error}, `Edge Worker reconcile pass failed: ${messageOf(error)}`))
        .finally(() => {
          running = undefined
        })
    }
    const timer = setInterval(tick, intervalMs)
    const stop = () => {
      clearInterval(timer)
      void (running ?? Promise.resolve()).then(() => resolve())
    }
    if (signal.aborted) return stop()
    signal.addEventListener('abort', stop, {once: true})
    tick()
  })
}
