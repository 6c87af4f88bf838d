// A reconcile pass (`edgeworkers reconcile`): the provider is validated first — an invalid one skips
// the whole pass (nothing can be dispatched without one) — then each selected lane runs once, in a fixed order,
// inside its own error boundary and time budget. A lane that throws is reported and the next one runs.
import type {ArtifactStore} from '../../artifacts/store.js'
import {KitError, messageOf} from '../../errors.js'
import type {OutboxOperation} from '../../store/index.js'
import type {Engine} from '../context.js'
import {executionGate} from '../gates.js'
import type {ProviderResolution} from '../provider.js'
import {confirmFences, type FenceConfirmation} from '../fence/confirm.js'
import type {EdgeProvider} from '../../provider/types.js'
import {artifactCleanupLane} from './artifact-cleanup.js'
import {controlAuditLane} from './control-audit.js'
import {deferredLane} from './deferred.js'
import {hostReconcileLane} from './host-reconcile.js'
import {LANE_LABELS, LANE_NAMES, type DispatchDeploy, type Lane, type LaneCounts, type LaneName, type LaneSummary, type RowDoneEvent} from './lane.js'
import {recoveryLane} from './recovery.js'

const LANES: Record<LaneName, {run: Lane; operations: OutboxOperation[]}> = {
  recovery: {run: recoveryLane, operations: ['deploy']},
  deferred: {run: deferredLane, operations: ['deploy']},
  artifact_cleanup: {run: artifactCleanupLane, operations: ['artifact_cleanup']},
  control_audit: {run: controlAuditLane, operations: ['control_audit']},
  host_reconcile: {run: hostReconcileLane, operations: []},
}

export interface PassOptions {
  /** Lanes to run (always in the order of LANE_NAMES); default all. */
  lanes?: readonly LaneName[]
  /** Aborting stops the pass between rows: lanes claim nothing more and hand back what they hold. */
  signal?: AbortSignal
  /** Default: the deploy task, in-process. Tests and benchmarks substitute a recording one. */
  dispatchDeploy?: DispatchDeploy
  /** Default: the engine's artifact store. */
  openArtifactStore?: () => Promise<ArtifactStore>
  /** Called as each claimed deploy row reaches its outcome (progress display). */
  onRowDone?: (event: RowDoneEvent) => void
}

export interface PassResult {
  status: 'ran' | 'skipped'
  /** Why the pass was skipped: the provider's code (`edge_workers_provider_invalid`) and message. */
  skipped?: {code: string; message: string}
  /** The kit scope swept; empty when no provider could tell it. */
  scope: string
  startedAt: string
  durationMs: number
  lanes: LaneSummary[]
  /** Fences the pass found the store and host disagreeing about, and how it settled each (../fence/confirm.ts). */
  fences: FenceConfirmation[]
  /** Why fences could not be confirmed (host unreachable…); the lanes still ran on the store's view. */
  fenceError?: string
  /**
   * Rows of the selected lanes' operations left `failed` or `uncertain` in scope: they wait for an
   * operator. null when they could not be counted (no scope, or the store failed).
   */
  remaining: {failed: number; uncertain: number} | null
  /**
   * With the recovery lane: pending deploys this pass could not take yet (backoff, cooldown, or a
   * waiting `deploy` within its grace) and when the first becomes due; a later pass runs them.
   */
  waiting: {deploys: number; nextDueInMs: number | null} | null
}

export async function runPass(engine: Engine, options: PassOptions = {}): Promise<PassResult> {
  const startedAt = new Date().toISOString()
  const start = performance.now()
  const selected = LANE_NAMES.filter((lane) => !options.lanes || options.lanes.includes(lane))
  const finish = (fields: Omit<PassResult, 'startedAt' | 'durationMs'>): PassResult => ({
    ...fields,
    startedAt,
    durationMs: Math.round(performance.now() - start),
  })

  let resolution: ProviderResolution
  try {
    resolution = await engine.resolveProvider()
  } catch (error) {
    throw new KitError('store_unavailable', `the reconcile pass could not start: ${messageOf(error)}`)
  }
  if (resolution.status === 'invalid') {
    engine.log.warn({code: resolution.code, reason: resolution.message}, `Edge Worker recovery skipped: ${resolution.code}`)
    return finish({
      status: 'skipped',
      skipped: {code: resolution.code, message: resolution.message},
      scope: '',
      lanes: [],
      fences: [],
      remaining: null,
      waiting: null,
    })
  }
  const scope = resolution.status === 'ready' ? resolution.scope : engine.settings.provider.scope

  const fenceCheck = resolution.status === 'ready' ? await confirmFencesFirst(engine, resolution.provider, scope, selected, options.signal) : {fences: []}
  const lanes: LaneSummary[] = []
  for (const lane of selected) lanes.push(await runLane(engine, lane, {resolution, scope, options}))
  const [remaining, waiting] = await Promise.all([countRemaining(engine, scope, selected), countWaiting(engine, scope, selected)])
  return finish({status: 'ran', scope, lanes, ...fenceCheck, remaining, waiting})
}

/**
 * Lost-fence confirmation belongs to host reconcile but runs before every lane: a fence the host
 * lifted at its TTL must reopen the gate for this pass's gated lanes, not the next pass's. Without
 * host_reconcile selected it runs only while the store shows a fence open (the gate is closed).
 */
async function confirmFencesFirst(
  engine: Engine,
  provider: EdgeProvider,
  scope: string,
  lanes: LaneName[],
  signal?: AbortSignal,
): Promise<Pick<PassResult, 'fences' | 'fenceError'>> {
  try {
    if (!lanes.includes('host_reconcile') && !(await engine.store.kit.openFence(scope))) return {fences: []}
    return {fences: await confirmFences(engine, provider, scope, signal)}
  } catch (error) {
    const fenceError = messageOf(error)
    engine.log.warn({err: error}, `Edge Worker host reconcile failed: backup fences could not be confirmed: ${fenceError}`)
    return {fences: [], fenceError}
  }
}

async function runLane(engine: Engine, lane: LaneName, pass: {resolution: ProviderResolution; scope: string; options: PassOptions}): Promise<LaneSummary> {
  const {options} = pass
  const start = performance.now()
  const deadline = start + laneBudgetSeconds(lane, engine.settings) * 1000
  const counts: LaneCounts = {claimed: 0, completed: 0, retried: 0, failed: 0, uncertain: 0, skipped: 0}
  const visited = new Set<string>()
  let skippedReason: string | undefined
  let note: string | undefined
  let error: string | undefined
  try {
    if (options.signal?.aborted) {
      skippedReason = 'the pass was stopped'
    } else {
      await LANES[lane].run({
        engine,
        scope: pass.scope,
        // Per lane, not per pass: a fence that opens during a long pass holds the lanes after it.
        gate: await executionGate(engine, pass.resolution),
        counts,
        shouldStop: () => performance.now() >= deadline || options.signal?.aborted === true,
        firstVisit: (rowId) => {
          if (visited.has(rowId)) return false
          visited.add(rowId)
          return true
        },
        rowDone: (event) => options.onRowDone?.({lane, ...event}),
        note: (text) => {
          note = text
        },
        skip: (reason) => {
          skippedReason = reason
        },
        dispatchDeploy: options.dispatchDeploy ?? dispatchInProcess,
        openArtifactStore: options.openArtifactStore ?? (async () => engine.artifacts),
      })
    }
  } catch (thrown) {
    error = messageOf(thrown)
    engine.log.warn({lane, err: thrown}, `Edge Worker ${LANE_LABELS[lane]} failed: ${error}`)
  }
  const summary: LaneSummary = {
    lane,
    ...counts,
    durationMs: Math.round(performance.now() - start),
    ...(skippedReason ? {skippedReason} : {}),
    ...(note ? {note} : {}),
    ...(error ? {error} : {}),
  }
  const tally = (['claimed', 'completed', 'retried', 'failed', 'uncertain', 'skipped'] as const).map((key) => `${key}=${counts[key]}`).join(' ')
  engine.log.info(
    summary,
    `Edge Worker ${LANE_LABELS[lane]} pass: ${tally} duration_ms=${summary.durationMs}${skippedReason ? ` (${skippedReason})` : ''}${note ? ` (${note})` : ''}`,
  )
  return summary
}

/**
 * On-prem "publish": the deploy task, in this process. Loaded on first use, so a pass with nothing to
 * dispatch — most cron passes — does not load the deploy pipeline.
 */
const dispatchInProcess: DispatchDeploy = async (engine, args) => (await import('../deploy/task.js')).runDeployTask(engine, args)

/** Host reconcile has its own pass timeout (it lists the whole host); every other lane the reconcile budget. */
function laneBudgetSeconds(lane: LaneName, settings: Engine['settings']): number {
  return lane === 'host_reconcile' ? settings.host_reconcile.pass_timeout_seconds : settings.reconcile.lane_budget_seconds
}

async function countRemaining(engine: Engine, scope: string, lanes: LaneName[]): Promise<PassResult['remaining']> {
  if (!scope) return null
  const operations = [...new Set(lanes.flatMap((lane) => LANES[lane].operations))]
  try {
    return await engine.store.sweeps.countUnsettled(scope, operations)
  } catch (error) {
    engine.log.error({err: error}, `Edge Worker reconcile could not count the rows left failed or uncertain: ${messageOf(error)}`)
    return null
  }
}

async function countWaiting(engine: Engine, scope: string, lanes: LaneName[]): Promise<PassResult['waiting']> {
  if (!scope || !lanes.includes('recovery')) return null
  const {settings, store} = engine
  try {
    const waiting = await store.sweeps.waitingDeployments({scope, graceSeconds: settings.recovery.dispatch_grace_seconds})
    return {deploys: waiting.count, nextDueInMs: waiting.nextDueAt === null ? null : Math.max(0, waiting.nextDueAt - store.clock.now())}
  } catch (error) {
    engine.log.error({err: error}, `Edge Worker reconcile could not count the deploys waiting for a later pass: ${messageOf(error)}`)
    return null
  }
}
