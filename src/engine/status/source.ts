// Everything the live status view asks of the engine, behind one interface, so the view (src/tui)
// never touches the store or the provider itself. The engine is connected lazily and again after a
// failure: a view started while the store is unreachable shows why and keeps trying.
import type {AuditActor, ErrorGroup, OutboxRowSummary} from '../../store/index.js'
import type {Engine} from '../context.js'
import type {LaneName} from '../pass/lane.js'
import {
  cancelOutboxRow,
  operatorScope,
  outboxRowDetail,
  retryOutboxRow,
  rollbackFromStatus,
  runLaneOnce,
  type ActionDone,
  type OutboxRowDetail,
} from './actions.js'
import type {TailLine} from '../../protocol/tail.js'
import {tailWorker, type TailNotice} from '../tail.js'
import {SNAPSHOT_LIST_LIMIT, takeSnapshot, type StatusSnapshot} from './snapshot.js'

export type ErrorGroupKey = Pick<ErrorGroup, 'status' | 'operation' | 'last_error_code'>

/** Every method may reject; the view shows the error's message in place of what it asked for. */
export interface StatusSource {
  snapshot(): Promise<StatusSnapshot>
  groupRows(group: ErrorGroupKey): Promise<OutboxRowSummary[]>
  outboxRow(id: string): Promise<OutboxRowDetail | null>
  retry(id: string): Promise<ActionDone>
  cancel(id: string): Promise<ActionDone>
  /** Rolls the Worker of a department back to the version served before the current one. */
  rollback(departmentId: string): Promise<ActionDone>
  /** `signal` stops the pass between rows (the view quits). */
  runLane(lane: LaneName, signal?: AbortSignal): Promise<ActionDone>
  /** The live tail of a Worker (by script name), every line (event or notice) to `onLine`, until `signal` aborts. */
  tail(script: string, signal: AbortSignal, onLine: (line: TailLine) => void, onNotice: (notice: TailNotice) => void): Promise<void>
}

export function engineStatusSource(connect: () => Promise<Engine>, actor: AuditActor): StatusSource {
  let connected: Engine | undefined
  const engine = async () => (connected ??= await connect())
  return {
    snapshot: async () => takeSnapshot(await engine()),
    groupRows: async (group) => {
      const kit = await engine()
      return kit.store.status.groupRows(await operatorScope(kit), group, SNAPSHOT_LIST_LIMIT)
    },
    outboxRow: async (id) => outboxRowDetail(await engine(), id),
    retry: async (id) => retryOutboxRow(await engine(), id, actor),
    cancel: async (id) => cancelOutboxRow(await engine(), id, actor),
    rollback: async (departmentId) => rollbackFromStatus(await engine(), departmentId, actor),
    runLane: async (lane, signal) => runLaneOnce(await engine(), lane, signal),
    tail: async (script, signal, onLine, onNotice) => {
      for await (const line of tailWorker(await engine(), script, {filters: {methods: [], samplingRate: 1}, signal, onNotice})) onLine(line)
    },
  }
}
