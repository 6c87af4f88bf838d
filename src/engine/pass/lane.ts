// What one lane of a pass works with and reports. A lane counts into its tally as it goes, so a lane
// that throws half-way still reports what it did before the error. Each row a lane works on ends in
// one RowResult (../row-result.ts): the lane settles or requeues its leased row from it
// (./row-writes.ts) and counts it here.
import type {ArtifactStore} from '../../artifacts/store.js'
import type {Engine} from '../context.js'
import type {DeployTaskArgs, DeployTaskResult} from '../deploy/task.js'
import type {ExecutionGate} from '../gates.js'
import type {RowResult} from '../row-result.js'

export const LANE_NAMES = ['recovery', 'deferred', 'artifact_cleanup', 'control_audit', 'host_reconcile'] as const
export type LaneName = (typeof LANE_NAMES)[number]

/** How log lines name each lane (`Edge Worker <label> failed: …`). */
export const LANE_LABELS: Record<LaneName, string> = {
  recovery: 'recovery',
  deferred: 'deferred republish',
  artifact_cleanup: 'artifact cleanup',
  control_audit: 'control audit',
  host_reconcile: 'host reconcile',
}

export interface LaneSummary {
  lane: LaneName
  /** Rows the lane claimed (stamped or leased) in this pass; each ends in exactly one count below. */
  claimed: number
  /** Settled `completed` — or `cancelled`, for a cleanup whose artifact turned out to be in use. */
  completed: number
  /** Rescheduled on the backoff ladder. */
  retried: number
  failed: number
  uncertain: number
  /** Claimed but left for later: budget spent, pass stopped, another runner won the row. */
  skipped: number
  durationMs: number
  /** Why the lane claimed nothing at all (gate closed, no rules yet). */
  skippedReason?: string
  /** What else the lane has to say (e.g. host reconcile: where a pending restore stands). */
  note?: string
  /** The error that ended the lane early. */
  error?: string
}

export type LaneCounts = Pick<LaneSummary, 'claimed' | 'completed' | 'retried' | 'failed' | 'uncertain' | 'skipped'>
export type RowOutcome = Exclude<keyof LaneCounts, 'claimed'>

export interface RowDoneEvent {
  lane: LaneName
  rowId: string
  scriptName: string | null
  outcome: RowOutcome
}

/** Runs one deploy task for a claimed row; on-prem "publish" is this call, in-process. */
export type DispatchDeploy = (engine: Engine, args: DeployTaskArgs) => Promise<DeployTaskResult>

export interface LaneRun {
  engine: Engine
  /** The kit scope this pass sweeps; empty when no provider could tell it. */
  scope: string
  gate: ExecutionGate
  counts: LaneCounts
  /** True once the lane's time budget is spent or the pass was asked to stop: claim nothing more. */
  shouldStop(): boolean
  /** False when this pass already handled the row (it came due again): each row at most once per pass. */
  firstVisit(rowId: string): boolean
  /** Tells the pass's caller a claimed row reached its outcome (progress display). */
  rowDone(event: Omit<RowDoneEvent, 'lane'>): void
  /** Adds the lane's note to its summary. */
  note(text: string): void
  /** Marks the lane as having done nothing, and why. */
  skip(reason: string): void
  dispatchDeploy: DispatchDeploy
  /** Builds the artifact store for this lane run; may fail (the cleanup lane burns an attempt per row then). */
  openArtifactStore(): Promise<ArtifactStore>
}

export type Lane = (run: LaneRun) => Promise<void>

/** The count of the lane's summary a row's result goes to. */
export function countOf(result: RowResult): RowOutcome {
  switch (result.outcome) {
    case 'done':
      return 'completed'
    case 'requeue_after':
      return 'retried'
    case 'terminal':
      return 'failed'
    case 'uncertain':
      return 'uncertain'
    case 'skipped':
      return 'skipped'
  }
}

/** Counts a row's result into the lane's tally; returns the count it went to. */
export function tally(run: Pick<LaneRun, 'counts'>, result: RowResult): RowOutcome {
  const counted = countOf(result)
  run.counts[counted]++
  return counted
}
