// The backup fence lifecycle (`fence begin|end|status`). Order matters for crash safety:
// - begin records the fence in the store first — the execution gate closes before the host freezes,
//   so no deploy task is mid-upload when the host starts refusing — then asks the host to hold it;
// - end lifts it on the host first, then records it, then republishes the deferred deploys.
// A process killed between any two steps leaves a state the host-reconcile lane settles
// (./confirm.ts), and the host lifts every fence at its TTL by itself.
import {KitError} from '../../errors.js'
import type {EdgeProvider, HostFence} from '../../provider/types.js'
import {SYSTEM_ACTOR, type AuditActor, type GateRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {runPass, type LaneSummary, type PassOptions} from '../pass/index.js'
import {confirmFences} from './confirm.js'
import {FENCE_ACTIONS, fenceAuditEntry, fenceView, hostCallError, isFenceUnknownToHost, type FenceView} from './fence.js'
import {ProviderError} from '../../provider/types.js'
import {resolveIdPrefix} from '../id-prefix.js'
import {requireProvider} from '../provider.js'

export const MIN_FENCE_TTL_SECONDS = 5
const MAX_REASON_LENGTH = 200

export interface BeginFenceInput {
  ttlSeconds?: number
  reason: string
  actor?: AuditActor
}

export async function beginFence(engine: Engine, input: BeginFenceInput): Promise<FenceView> {
  const ttlSeconds = validTtl(engine, input.ttlSeconds)
  const reason = validReason(input.reason)
  const {provider, scope} = await requireProvider(engine, 'begin a backup fence')
  // A fence the host already lifted while the store missed it must not block this one.
  if (await engine.store.kit.openFence(scope)) {
    await confirmFences(engine, provider, scope).catch((error: unknown) => {
      throw hostCallError(error, 'cannot begin a backup fence', 'nothing was changed')
    })
  }
  const row = await engine.store.kit.beginFence({scope, reason, ttlSeconds})
  let held: HostFence
  try {
    held = await provider.beginFence({fenceId: row.id, ttlSeconds, reason})
  } catch (error) {
    throw await undoBegin(engine, provider, row.id, error)
  }
  const acked = await engine.store.transaction(async (tx) => {
    if (!(await tx.kit.ackFence(row.id, held.expiresAt))) return false
    await tx.audit.append(
      fenceAuditEntry(FENCE_ACTIONS.begun, row.id, input.actor ?? SYSTEM_ACTOR, {scope, reason, ttl_seconds: ttlSeconds, expires_at: held.expiresAt}),
    )
    return true
  })
  if (!acked) {
    // A reconcile pass closed the fence while the host was slow to answer: do not leave the host frozen.
    await provider.endFence(row.id).catch(() => undefined)
    throw new KitError('conflict', `fence ${row.id} was closed by a reconcile pass before the host acknowledged it; begin again`, 'fence_lifted')
  }
  engine.log.info({fenceId: row.id, scope, expiresAt: new Date(held.expiresAt).toISOString()}, 'backup fence begun')
  return fenceView((await engine.store.kit.getFence(row.id))!)
}

/**
 * The host refused or never answered the begin. If it certainly holds nothing, close the store's
 * record now; if it may hold the fence, lift it there first. When neither can be settled, the
 * record stays and a reconcile pass (or the host's TTL) settles it.
 */
async function undoBegin(engine: Engine, provider: EdgeProvider, fenceId: string, error: unknown): Promise<KitError> {
  const maybeHeld = error instanceof ProviderError && error.kind === 'ambiguous'
  let settled = !maybeHeld
  if (maybeHeld) {
    settled = await provider.endFence(fenceId).then(
      () => true,
      (endError: unknown) => isFenceUnknownToHost(endError),
    )
  }
  if (settled) await engine.store.kit.endFence(fenceId, 'begin_failed')
  const consequence = settled
    ? 'no fence is in place'
    : `fence ${fenceId} stays recorded until a reconcile pass confirms it with the host (the host lifts it by itself at its TTL)`
  return hostCallError(error, 'the edge host did not take the backup fence', consequence)
}

export interface EndFenceInput {
  /** Default: the scope's open fence. */
  fenceId?: string
  actor?: AuditActor
  /** Default true: run the deferred lane right after the lift. */
  republish?: boolean
  onRowDone?: PassOptions['onRowDone']
}

export interface EndFenceResult {
  fence: FenceView
  /** The deferred lane run right after the lift; null when not asked for. */
  republish: LaneSummary | null
}

export async function endFence(engine: Engine, input: EndFenceInput = {}): Promise<EndFenceResult> {
  const {provider, scope} = await requireProvider(engine, 'end a backup fence')
  const row = input.fenceId
    ? await engine.store.kit.getFence(
        await resolveIdPrefix('backup fence', input.fenceId, (prefix, limit) => engine.store.kit.fenceIdsWithPrefix(prefix, limit)),
      )
    : await engine.store.kit.openFence(scope)
  if (!row) throw new KitError('not_found', `no backup fence is open for ${scope}`)
  if (row.ended_at !== null) {
    throw new KitError(
      'conflict',
      `backup fence ${row.id} was already lifted at ${new Date(Number(row.ended_at)).toISOString()} (${row.end_reason})`,
      'fence_lifted',
    )
  }
  let liftReason: string
  try {
    const lifted = await provider.endFence(row.id)
    liftReason = lifted.liftReason === 'expired' ? 'expired' : 'ended'
  } catch (error) {
    if (!isFenceUnknownToHost(error)) {
      throw hostCallError(
        error,
        `cannot lift backup fence ${row.id}`,
        `it stays in place; the host lifts it by itself at ${new Date(Number(row.expires_at)).toISOString()}`,
      )
    }
    liftReason = 'never_acknowledged'
  }
  await engine.store.transaction(async (tx) => {
    // A reconcile pass may have recorded the lift first (its own audit row says how it found it).
    if (await tx.kit.endFence(row.id, liftReason)) {
      await tx.audit.append(fenceAuditEntry(FENCE_ACTIONS.ended, row.id, input.actor ?? SYSTEM_ACTOR, {scope, end_reason: liftReason}))
    }
  })
  engine.log.info({fenceId: row.id, scope, liftReason}, 'backup fence lifted')
  const fence = fenceView((await engine.store.kit.getFence(row.id))!)
  if (input.republish === false) return {fence, republish: null}
  return {fence, republish: await republishDeferred(engine, {onRowDone: input.onRowDone})}
}

/** One run of the deferred lane: the deploys held by a fence, oldest first. */
export async function republishDeferred(engine: Engine, options: Pick<PassOptions, 'onRowDone' | 'signal'> = {}): Promise<LaneSummary> {
  const pass = await runPass(engine, {...options, lanes: ['deferred']})
  if (pass.status === 'skipped') throw new KitError('unpaired', `cannot republish: ${pass.skipped!.message}`, pass.skipped!.code)
  return pass.lanes[0]!
}

/**
 * Runs `work` inside a backup fence. Joins the scope's open, acknowledged fence when there is one
 * (`fence run -- edgeworkers backup create …`) and leaves it to its owner; else begins a fence and
 * always ends it.
 */
export async function withFence<T>(engine: Engine, input: BeginFenceInput, work: (fence: FenceView, joined: boolean) => Promise<T>): Promise<T> {
  const {scope} = await requireProvider(engine, 'begin a backup fence')
  const open = await engine.store.kit.openFence(scope)
  if (open && open.state === 'active' && Number(open.expires_at) > engine.store.clock.now()) return work(fenceView(open), true)
  const fence = await beginFence(engine, input)
  try {
    return await work(fence, false)
  } finally {
    await endFence(engine, {fenceId: fence.id, actor: input.actor})
  }
}

export interface FenceStatus {
  scope: string
  /** The store's open fence, if any. */
  open: FenceView | null
  /** The store's latest fences, newest first. */
  recent: FenceView[]
  gates: GateRow
  host: {reachable: boolean; active: HostFenceView | null; error: string | null}
  /** The store shows a fence open past its expiry: the host should have lifted it; run a reconcile pass. */
  overdue: boolean
}

export interface HostFenceView {
  fenceId: string
  reason: string
  startedAt: string
  expiresAt: string
  secondsLeft: number
}

export async function fenceStatus(engine: Engine, options: {recent?: number} = {}): Promise<FenceStatus> {
  const {provider, scope} = await requireProvider(engine, 'read the backup fence')
  const [open, recent, gates] = await Promise.all([
    engine.store.kit.openFence(scope),
    engine.store.kit.listFences(scope, options.recent ?? 10),
    engine.store.kit.getGates(scope),
  ])
  const now = engine.store.clock.now()
  let host: FenceStatus['host']
  try {
    const status = await provider.fenceStatus()
    const active = status.active
    host = {
      reachable: true,
      error: null,
      active: active && {
        fenceId: active.fenceId,
        reason: active.reason,
        startedAt: new Date(active.startedAt).toISOString(),
        expiresAt: new Date(active.expiresAt).toISOString(),
        secondsLeft: Math.max(0, Math.round((active.expiresAt - now) / 1000)),
      },
    }
  } catch (error) {
    host = {reachable: false, active: null, error: (error as Error).message}
  }
  return {scope, open: open ? fenceView(open) : null, recent: recent.map(fenceView), gates, host, overdue: open !== undefined && Number(open.expires_at) < now}
}

function validTtl(engine: Engine, ttlSeconds: number | undefined): number {
  const {default_ttl_seconds: fallback, max_ttl_seconds: max} = engine.settings.fence
  const ttl = ttlSeconds ?? fallback
  if (!Number.isInteger(ttl) || ttl < MIN_FENCE_TTL_SECONDS || ttl > max) {
    throw new KitError('usage', `fence TTL ${ttl}s is out of range: ${MIN_FENCE_TTL_SECONDS}–${max} seconds (fence.max_ttl_seconds)`)
  }
  return ttl
}

function validReason(reason: string): string {
  const trimmed = reason.trim()
  if (!trimmed) throw new KitError('usage', 'a fence needs a reason (--reason)')
  if (trimmed.length > MAX_REASON_LENGTH || /[\r\n]/.test(trimmed))
    throw new KitError('usage', `--reason must be one line of at most ${MAX_REASON_LENGTH} characters`)
  return trimmed
}
