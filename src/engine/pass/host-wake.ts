// Rows waiting for a host they could not reach come due again on the backoff ladder (../retry.ts),
// whose steps grow with each wait. Once the host answers again there is nothing left to wait for:
// a lane asks it once (a cheap read) before it claims, and makes its waiting rows due now, so they
// complete in this pass rather than at the end of a step. Waking costs no attempt (nothing was
// asked of the host for those rows); a row that meets a host failing again goes on waiting.
import type {OutboxOperation} from '../../store/index.js'
import {EDGE_HOST_UNREACHABLE} from '../retry.js'
import type {LaneRun} from './lane.js'

/** How long the lane waits for the host's answer before it leaves the rows to their ladder. */
const PROBE_TIMEOUT_MS = 5_000

export async function wakeRowsWaitingForHost(run: LaneRun, operation: OutboxOperation): Promise<void> {
  const {store, log} = run.engine
  const rows = {scope: run.scope, operation, errorCode: EDGE_HOST_UNREACHABLE}
  if (!run.scope || !(await store.sweeps.waitingForHost(rows))) return
  const resolution = await run.engine.resolveProvider()
  if (resolution.status !== 'ready') return
  try {
    await resolution.provider.describeHost(AbortSignal.timeout(PROBE_TIMEOUT_MS))
  } catch {
    return // Still down (or failing): the rows keep their ladder.
  }
  const woken = await store.sweeps.wakeWaitingForHost(rows)
  if (woken > 0) log.info({operation, rows: woken}, `Edge Worker host answers again: ${woken} ${operation} row(s) waiting for it are due now`)
}
