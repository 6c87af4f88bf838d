// What the recovery and deferred lanes do with the deploy rows they leased, several Workers at once:
// quarantine a row that cannot be dispatched, settle one whose Worker is gone, settle the rows of a
// claim that yield to a newer deploy together, else run the deploy task in-process under the
// claim's lease. The leases of rows not started yet are kept alive; rows the lane does not get to
// go back to the passes.
import {z} from 'zod'
import {isTransientConflict, SCRIPT_NAME_PATTERN, type HandBack, type HeldLease, type OutboxRow} from '../../store/index.js'
import {deployRowResult, GATE_CLOSED} from '../deploy/row-result.js'
import {supersededResult} from '../deploy/superseded.js'
import {LEASE_LOST, type RowResult} from '../row-result.js'
import {tally, type LaneRun} from './lane.js'
import {settleRow} from './row-writes.js'
import {messageOf} from '../../errors.js'
import {type Waiter, waiter} from '../../util/waiter.js'

export const DEPLOYMENT_PAYLOAD_INVALID = 'deployment_payload_invalid'
export const WORKER_DELETED = 'worker_deleted'
export const WORKER_DELETED_MESSAGE = 'the Worker row no longer exists'

/** The deploy payload exactly as enqueueDeploy (../deploy/enqueue.ts) writes it. */
const deployPayload = z.strictObject({
  releaseGeneration: z.string().min(1),
  baseRevision: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  operationSettingsDigest: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
})

/** Why a deploy row cannot be handed to the deploy task, or null when it can. */
export function deployRowProblem(row: OutboxRow): string | null {
  for (const column of ['company_id', 'department_id', 'worker_id', 'version_id'] as const) {
    if (!row[column]?.trim()) return `the deploy row has no ${column}`
  }
  if (!row.script_name || !SCRIPT_NAME_PATTERN.test(row.script_name)) return `the deploy row's script name ${JSON.stringify(row.script_name)} is invalid`
  const payload = deployPayload.safeParse(row.payload)
  if (!payload.success) {
    const issue = payload.error.issues[0]!
    return `the deploy payload is invalid: ${issue.path.join('.') || '(payload)'}: ${issue.message}`
  }
  return null
}

/** The lease a claimed row carries (the claim just took it). */
function leaseOf(row: OutboxRow): HeldLease {
  if (row.status !== 'leased' || row.lease_token === null) throw new Error(`outbox row ${row.id} carries no lease`)
  return {id: row.id, token: row.lease_token}
}

/**
 * Works through the rows `claim` leases, up to `reconcile.deploy_concurrency` at once so that their
 * uploads reach the host together and share its shard restarts. Rows of one Worker never run at
 * once: they go one after another, oldest first (an older one finds the newer row and yields without
 * uploading); a row claimed while an earlier row of its Worker still runs queues behind it. With
 * `repeat`, the next batch is claimed while the current one's last rows still run (no barrier:
 * runners never idle waiting for the slowest row of a batch), until a claim comes back empty, a row
 * comes due again (this pass already handled it), the gate closes, or the lane must stop. Each row
 * is counted. Rows not started and rows that came due again are handed back as `handBack` says (as
 * the lane claims them); a row whose task ended in an error keeps its lease until it runs out.
 * While rows wait to start, their leases are renewed every third of `deploy.lease_seconds`: a long
 * batch keeps what it claimed, and a pass that dies gives it back when the lease runs out.
 */
export function dispatchDeploys(run: LaneRun, claim: () => Promise<OutboxRow[]>, options: {repeat: boolean; handBack: HandBack}): Promise<void> {
  return new DeployDispatch(run, claim, options).run()
}

/** Wakes whoever waits for the dispatch to change: a row ended, a queue started, a claim landed. */
class Changes {
  private next: Waiter<void> = waiter()

  get changed(): Promise<void> {
    return this.next.promise
  }

  notify(): void {
    const current = this.next
    this.next = waiter()
    current.resolve()
  }
}

/** One dispatch of claimed deploy rows: per-Worker FIFO queues, `concurrency` runners, and the claims' leases. */
class DeployDispatch {
  private readonly concurrency: number
  /** Worker key → its rows, oldest first; present while queued or running. */
  private readonly queues = new Map<string, OutboxRow[]>()
  /** Keys of queues no runner has taken yet, in claim order. */
  private readonly ready: string[] = []
  private readonly claimed: OutboxRow[] = []
  /** Rows claimed again after this pass handled them: given back untouched. */
  private readonly claimedAgain: OutboxRow[] = []
  private readonly counted = new Set<string>()
  private readonly liveWorkers = new Set<string>()
  /** Rows claimed whose task has not started: their leases are renewed while they wait. */
  private readonly waiting = new Map<string, HeldLease>()
  /** Rows a runner took up: never handed back (their task may have begun; recovery resumes one that ended in an error). */
  private readonly started = new Set<string>()
  /** Claimed rows no runner has started yet: the next batch is claimed once fewer than `concurrency` are left. */
  private unstarted = 0
  private claimMore = true
  private claiming: Promise<void> | undefined
  private gateClosed = false
  private failure: unknown
  private readonly changes = new Changes()

  constructor(
    private readonly lane: LaneRun,
    private readonly claim: () => Promise<OutboxRow[]>,
    private readonly options: {repeat: boolean; handBack: HandBack},
  ) {
    this.concurrency = lane.engine.settings.reconcile.deploy_concurrency
  }

  async run(): Promise<void> {
    const {store} = this.lane.engine
    const leaseSeconds = this.lane.engine.settings.deploy.lease_seconds
    const renewal = setInterval(() => void store.sweeps.renewHeld([...this.waiting.values()], leaseSeconds).catch(() => {}), (leaseSeconds * 1000) / 3)
    try {
      // Every runner and the last claim settle before the error is raised: none is left writing after the lane returns.
      const runner = () =>
        this.runQueues()
          .catch((error: unknown) => void (this.failure ??= error))
          .finally(() => this.changes.notify())
      await Promise.all(Array.from({length: this.concurrency}, runner))
      await this.claiming
      if (this.failure !== undefined) throw this.failure
    } finally {
      clearInterval(renewal)
      await this.handBack()
    }
  }

  private mayStart(): boolean {
    return !this.gateClosed && this.failure === undefined && !this.lane.shouldStop()
  }

  private async claimBatch(): Promise<void> {
    const run = this.lane
    const rows = await this.claim()
    run.counts.claimed += rows.length
    const fresh = rows.filter((row) => run.firstVisit(row.id))
    this.claimedAgain.push(...rows.filter((row) => !fresh.includes(row)))
    this.claimMore &&= this.options.repeat && rows.length > 0 && fresh.length === rows.length
    this.claimed.push(...fresh)
    for (const id of await run.engine.store.sweeps.existingWorkerIds(fresh.flatMap((row) => (row.worker_id ? [row.worker_id] : [])))) this.liveWorkers.add(id)
    const superseded = await supersedeYielding(
      run,
      fresh.filter((row) => !deployRowProblem(row) && this.liveWorkers.has(row.worker_id!)),
    )
    for (const id of superseded) this.counted.add(id)
    const toRun = fresh.filter((row) => !superseded.has(row.id))
    this.unstarted += toRun.length
    for (const row of toRun) {
      this.waiting.set(row.id, leaseOf(row))
      const key = row.worker_id?.trim() ? `worker:${row.worker_id}` : `row:${row.id}`
      const queue = this.queues.get(key)
      if (queue) queue.push(row)
      else {
        this.queues.set(key, [row])
        this.ready.push(key)
      }
    }
  }

  /** Starts the next claim unless one is running, too many claimed rows wait, or the lane is done claiming. */
  private refill(): Promise<void> | undefined {
    if (!this.claiming && this.claimMore && this.unstarted < this.concurrency && this.mayStart()) {
      this.claiming = this.claimBatch()
        .catch((error: unknown) => {
          this.claimMore = false
          this.failure ??= error
        })
        .finally(() => {
          this.claiming = undefined
          this.changes.notify()
        })
    }
    return this.claiming
  }

  private async runQueues(): Promise<void> {
    const run = this.lane
    while (this.mayStart()) {
      const key = this.ready.shift()
      if (key === undefined) {
        // Nothing to start: wait for the claim, or for a running queue to start or end a row.
        const next = this.refill() ?? (this.queues.size > 0 ? this.changes.changed : undefined)
        if (!next) return
        await next
        continue
      }
      // A row claimed while this queue runs is appended to it and still visited: for…of reads the live array.
      for (const row of this.queues.get(key)!) {
        if (!this.mayStart()) return
        this.unstarted--
        this.waiting.delete(row.id)
        this.started.add(row.id)
        void this.refill()
        const result = await dispatchOne(run, row, this.liveWorkers, this.options.handBack).catch((error: unknown): RowResult => {
          // A store conflict that outlived the transaction's own retries costs this row, not the
          // lane. The task may have begun (its attempt counts): the row stays leased and goes to
          // recovery when the lease runs out, which resumes a begun deploy in reconcile mode.
          if (!isTransientConflict(error)) throw error
          run.engine.log.warn({outboxId: row.id, err: error}, `Edge Worker deployment left to recovery after a store conflict: ${messageOf(error)}`)
          return {outcome: 'skipped', reason: 'store_conflict'}
        })
        this.counted.add(row.id)
        run.rowDone({rowId: row.id, scriptName: row.script_name, outcome: tally(run, result)})
        this.gateClosed ||= result.outcome === 'skipped' && result.reason === GATE_CLOSED
      }
      this.queues.delete(key)
      this.changes.notify()
    }
  }

  /** Gives back the rows no runner started, and those claimed again after this pass handled them; counts them skipped. */
  private async handBack(): Promise<void> {
    const {store} = this.lane.engine
    const notStarted = this.claimed.filter((row) => !this.counted.has(row.id) && !this.started.has(row.id))
    for (const row of [...notStarted, ...this.claimedAgain]) {
      // Best effort: a row not handed back stays leased and is claimable again once its lease runs out.
      await store.sweeps.releaseLease(row.id, leaseOf(row).token, this.options.handBack).catch(() => false)
    }
    this.lane.counts.skipped += this.claimed.filter((row) => !this.counted.has(row.id)).length + this.claimedAgain.length
  }
}

/**
 * Settles the claimed rows that yield to a newer deploy of their Worker in one transaction, as the
 * deploy task would settle each after leasing it (a backlog of many versions per Worker is mostly
 * such rows); counts and logs them as the task's `superseded` outcome. A store conflict leaves them
 * all to the task. Returns their ids.
 */
async function supersedeYielding(run: LaneRun, rows: OutboxRow[]): Promise<Set<string>> {
  if (rows.length === 0) return new Set()
  const settled = await run.engine.store.sweeps
    .supersedeLeased(rows.map((row) => ({lease: leaseOf(row), versionId: row.version_id})))
    .catch((error: unknown) => {
      if (isTransientConflict(error)) return []
      throw error
    })
  const scriptOf = new Map(rows.map((row) => [row.id, row.script_name]))
  for (const {outboxId, newer} of settled) {
    const result = deployRowResult(supersededResult(run.engine, outboxId, newer))
    run.rowDone({rowId: outboxId, scriptName: scriptOf.get(outboxId) ?? null, outcome: tally(run, result)})
  }
  return new Set(settled.map((row) => row.outboxId))
}

async function dispatchOne(run: LaneRun, row: OutboxRow, liveWorkers: Set<string>, handBack: HandBack): Promise<RowResult> {
  const {store, log} = run.engine
  const lease = leaseOf(row)
  const fields = {outboxId: row.id, workerId: row.worker_id, versionId: row.version_id}

  const problem = deployRowProblem(row)
  if (problem) return quarantine(run, row, lease, problem)

  if (!liveWorkers.has(row.worker_id!)) {
    // The company was hard-deleted: nothing left to update or audit; the row is the only evidence.
    const result = await settleRow(run, row, {outcome: 'terminal', code: WORKER_DELETED, message: WORKER_DELETED_MESSAGE})
    if (result.outcome === 'terminal') log.warn({...fields, code: WORKER_DELETED}, `Edge Worker deployment failed: ${WORKER_DELETED_MESSAGE}`)
    return result
  }

  const result = await run.dispatchDeploy(run.engine, {
    outboxId: row.id,
    companyId: row.company_id!,
    departmentId: row.department_id!,
    messageId: row.id,
    claim: {row},
  })
  const rowResult = deployRowResult(result)
  if (rowResult.outcome === 'skipped' && rowResult.reason === GATE_CLOSED) {
    // The gate closed after the claim: the task did not touch the row. Give it back as it was claimed.
    await store.sweeps.releaseLease(lease.id, lease.token, handBack)
    log.info(fields, `Edge Worker deployment republish deferred: ${rowResult.message}`)
  }
  return rowResult
}

/**
 * A row the host was asked about before (its attempts), or whose version is mid-deploy, may have
 * reached the host: it becomes `uncertain` and its Worker pauses. Otherwise nothing happened yet and
 * it is `failed`.
 */
async function quarantine(run: LaneRun, row: OutboxRow, lease: HeldLease, problem: string): Promise<RowResult> {
  const {store, log} = run.engine
  const version = row.version_id ? await store.workers.getVersion(row.version_id) : undefined
  const mayHaveReachedHost = row.attempts > 0 || version?.state === 'deploying'
  const status = mayHaveReachedHost ? 'uncertain' : 'failed'
  const settled = await store.sweeps.quarantine(lease, {
    status,
    errorCode: DEPLOYMENT_PAYLOAD_INVALID,
    error: problem,
    workerId: row.worker_id?.trim() ? row.worker_id : null,
    versionId: version ? version.id : null,
  })
  if (!settled) return LEASE_LOST
  log.warn({outboxId: row.id, code: DEPLOYMENT_PAYLOAD_INVALID, status}, `Edge Worker deployment quarantined: ${problem}`)
  return {outcome: status === 'failed' ? 'terminal' : 'uncertain', code: DEPLOYMENT_PAYLOAD_INVALID, message: problem}
}
