// Backup fences, and the fence rule: while a fence is active no script or control state changes.
// A mutator bound by the rule takes a FencedTx, and only `guard` — which checks the fence inside the
// open write transaction — makes one, so a fence begun while an upload is being validated still
// stops that upload from committing, and the compiler refuses a mutation that skipped the check.
// Writes outside the rule take a plain WriteTx: fences themselves, pairing, the nonce ledger,
// runaway incidents and shard reassignment at start (none of them is what a backup copies for).
import {EDGE_HOST_FENCED, type HostFence} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
import {HostDatabase, type WriteTx} from './database.js'

/** How many lifted fences the host keeps for the kit's lost-fence confirmation. */
const FENCE_HISTORY = 100

interface FenceRow {
  fence_id: string
  reason: string
  started_at: number
  expires_at: number
  lifted_at: number | null
  lift_reason: HostFence['liftReason']
}

/** Held by this module alone: nothing else can construct a FencedTx. */
const checked = Symbol('fence checked')

/** A write transaction in which no fence was active; `now` is when that was checked (the mutation's time). */
export class FencedTx {
  readonly #tx: WriteTx

  constructor(
    key: typeof checked,
    tx: WriteTx,
    readonly now: number,
  ) {
    if (key !== checked) throw new Error('only Fences.guard hands out a fenced transaction')
    this.#tx = tx
  }

  run(sql: string, ...params: unknown[]) {
    return this.#tx.run(sql, ...params)
  }

  upsert(...args: Parameters<WriteTx['upsert']>) {
    return this.#tx.upsert(...args)
  }
}

export class Fences {
  constructor(private readonly db: HostDatabase) {}

  /** The fence check that opens a fenced write: refuses when a fence is active (lifting expired ones first). */
  guard(tx: WriteTx): FencedTx {
    const now = Date.now()
    this.expire(tx, now)
    refuseDuring(this.read('SELECT * FROM fences WHERE lifted_at IS NULL'))
    return new FencedTx(checked, tx, now)
  }

  /** The same check without a transaction: the cheap refusal before expensive work (an upload's validation). */
  assertNotFenced(): void {
    refuseDuring(this.active())
  }

  active(now = Date.now()): HostFence | null {
    return this.db.write((tx) => {
      this.expire(tx, now)
      return this.read('SELECT * FROM fences WHERE lifted_at IS NULL')
    })
  }

  get(fenceId: string): HostFence | null {
    return this.db.write((tx) => {
      this.expire(tx, Date.now())
      return this.read('SELECT * FROM fences WHERE fence_id = ?', fenceId)
    })
  }

  recent(): HostFence[] {
    return this.db.write((tx) => {
      this.expire(tx, Date.now())
      const rows = this.db.all<FenceRow>('SELECT * FROM fences WHERE lifted_at IS NOT NULL ORDER BY lifted_at DESC, fence_id LIMIT ?', FENCE_HISTORY)
      return rows.map(fenceFromRow)
    })
  }

  /** Begins a fence; the same active id again is a no-op (`created: false`). */
  begin(fenceId: string, ttlSeconds: number, reason: string): {fence: HostFence; created: boolean} {
    return this.db.write((tx) => {
      const now = Date.now()
      const active = this.active(now)
      if (active?.fenceId === fenceId) return {fence: active, created: false}
      if (active) throw new HostError('fence_active', `fence ${active.fenceId} is active until ${new Date(active.expiresAt).toISOString()}`)
      if (this.get(fenceId)) throw new HostError('fence_lifted', `fence ${fenceId} was already lifted; begin a new fence id`)
      tx.run('INSERT INTO fences (fence_id, reason, started_at, expires_at) VALUES (?, ?, ?, ?)', fenceId, reason, now, now + ttlSeconds * 1000)
      tx.run(
        `DELETE FROM fences WHERE lifted_at IS NOT NULL AND fence_id NOT IN
           (SELECT fence_id FROM fences WHERE lifted_at IS NOT NULL ORDER BY lifted_at DESC LIMIT ?)`,
        FENCE_HISTORY,
      )
      return {fence: this.get(fenceId)!, created: true}
    })
  }

  end(fenceId: string): HostFence {
    return this.db.write((tx) => {
      const fence = this.get(fenceId)
      if (!fence) throw new HostError('fence_not_found', `the host has no fence ${fenceId}`)
      if (fence.liftedAt === null) tx.run(`UPDATE fences SET lifted_at = ?, lift_reason = 'ended' WHERE fence_id = ?`, Date.now(), fenceId)
      return this.get(fenceId)!
    })
  }

  /** Lifts every fence whose TTL has passed, as of its expiry time. */
  private expire(tx: WriteTx, now: number): void {
    tx.run(`UPDATE fences SET lifted_at = expires_at, lift_reason = 'expired' WHERE lifted_at IS NULL AND expires_at <= ?`, now)
  }

  private read(sql: string, ...params: unknown[]): HostFence | null {
    const row = this.db.one<FenceRow>(sql, ...params)
    return row ? fenceFromRow(row) : null
  }
}

/**
 * Makes a backup copy of the state self-contained and records `fenceId` — the fence the copy was
 * taken under — as lifted in it, so a host started from the copy is not frozen.
 */
export function sealSnapshotCopy(file: string, fenceId: string, liftedAt: number): void {
  HostDatabase.amendCopy(file, (tx) => {
    tx.run(`UPDATE fences SET lifted_at = ?, lift_reason = 'ended' WHERE fence_id = ? AND lifted_at IS NULL`, liftedAt, fenceId)
  })
}

function refuseDuring(active: HostFence | null): void {
  if (!active) return
  throw new HostError(
    EDGE_HOST_FENCED,
    `the host is fenced for a backup (fence ${active.fenceId} until ${new Date(active.expiresAt).toISOString()}); mutations are refused`,
  )
}

function fenceFromRow(row: FenceRow): HostFence {
  return {
    fenceId: row.fence_id,
    reason: row.reason,
    startedAt: row.started_at,
    expiresAt: row.expires_at,
    liftedAt: row.lifted_at,
    liftReason: row.lift_reason,
  }
}
