// Per-scope kit state: the pairing with an edge host, backup fences, and the maintenance/restore gates.
// The pairing's shared secret is read only through pairingSecret(); every other read leaves it out,
// so no listing or report can print it.
import type {Kysely} from 'kysely'
import {KitError} from '../../errors.js'
import type {StoreContext} from '../context.js'
import {newId} from '../ids.js'
import {idsWithPrefix} from './id-prefix.js'
import {moveUnfinishedRows} from '../outbox/statements.js'
import {upsertMember} from './hosts.js'
import type {Database, FenceRow, GateRow, KitGatesTable, PairingRow} from '../schema.js'

export interface PairingInput {
  scope: string
  host_url: string
  host_fingerprint: string
  host_public_key: string
  shared_secret: string
}

export type GateName = 'maintenance' | 'restore_pending'

const pairingColumns = ['scope', 'host_url', 'host_fingerprint', 'host_public_key', 'paired_at', 'unpaired_at'] as const

export class KitRepository {
  constructor(private readonly ctx: StoreContext) {}

  /** Records (or replaces) the scope's pairing; the host is the kit's first member (docs/many-hosts.md). */
  async savePairing(input: PairingInput, publicUrl: string | null = null): Promise<PairingRow> {
    return this.ctx.atomic(async (ctx) => {
      const row = {...input, paired_at: ctx.now(), unpaired_at: null}
      await ctx.db
        .insertInto('kit_pairings')
        .values(row)
        .onConflict((oc) => oc.column('scope').doUpdateSet(row))
        .execute()
      await upsertMember(ctx, input.scope, input, publicUrl)
      const {shared_secret: _secret, ...pairing} = row
      return pairing
    })
  }

  async getPairing(scope: string): Promise<PairingRow | undefined> {
    return this.ctx.db.selectFrom('kit_pairings').select(pairingColumns).where('scope', '=', scope).executeTakeFirst()
  }

  /** Every scope currently paired with a host, by scope. */
  async listActivePairings(): Promise<PairingRow[]> {
    return this.ctx.db.selectFrom('kit_pairings').select(pairingColumns).where('unpaired_at', 'is', null).orderBy('scope').execute()
  }

  /** The secret that signs management requests, while the scope is paired. */
  async pairingSecret(scope: string): Promise<string | undefined> {
    const row = await this.ctx.db
      .selectFrom('kit_pairings')
      .select('shared_secret')
      .where('scope', '=', scope)
      .where('unpaired_at', 'is', null)
      .executeTakeFirst()
    return row?.shared_secret
  }

  /** false when the scope was not paired. Every host of the kit leaves it too. */
  async unpair(scope: string): Promise<boolean> {
    return this.ctx.atomic(async (ctx) => {
      const {db} = ctx
      const at = ctx.now()
      const result = await db.updateTable('kit_pairings').set({unpaired_at: at}).where('scope', '=', scope).where('unpaired_at', 'is', null).executeTakeFirst()
      await db.updateTable('kit_hosts').set({removed_at: at}).where('scope', '=', scope).where('removed_at', 'is', null).execute()
      return result.numUpdatedRows > 0n
    })
  }

  /**
   * Replaces the host of scope `from` with the newly paired one, in one transaction: the new pairing
   * is saved, the old one ends, the Workers that `from` served and its unfinished outbox rows move to
   * the new scope (due at once), and the new scope's restore gate closes with `reason` — so the next pass redeploys
   * onto the new host what it lacks (the restore verification) before new deploys are taken.
   */
  async replacePairing(input: PairingInput, from: string, reason: string): Promise<{pairing: PairingRow; workers: number; rows: number}> {
    return this.ctx.atomic(async (ctx) => {
      const pairing = await new KitRepository(ctx).savePairing(input)
      await ctx.db.updateTable('kit_pairings').set({unpaired_at: ctx.now()}).where('scope', '=', from).where('unpaired_at', 'is', null).execute()
      // The replaced host leaves; the kit's other hosts follow its Workers to the new scope.
      await ctx.db.updateTable('kit_hosts').set({removed_at: ctx.now()}).where('host_scope', '=', from).where('removed_at', 'is', null).execute()
      await ctx.db.updateTable('kit_hosts').set({scope: input.scope}).where('scope', '=', from).where('removed_at', 'is', null).execute()
      const workers = await ctx.db.updateTable('edge_workers').set({serving_scope: input.scope}).where('serving_scope', '=', from).executeTakeFirst()
      const rows = await moveUnfinishedRows(ctx, from, input.scope)
      await new KitRepository(ctx).setGate(input.scope, 'restore_pending', reason)
      return {pairing, workers: Number(workers.numUpdatedRows), rows}
    })
  }

  /**
   * Records a fence as `requested` (the host acknowledges it with ackFence) — or, with `hostAckedAt`,
   * adopts one the host already holds. Refused while the scope has an open fence; the partial unique
   * index kit_fences_one_open settles two racing writers.
   */
  async beginFence(input: {
    id?: string
    scope: string
    reason: string
    ttlSeconds: number
    beganAt?: number
    expiresAt?: number
    hostAckedAt?: number
  }): Promise<FenceRow> {
    type Outcome = {row: FenceRow; conflict?: undefined} | {row?: undefined; conflict: FenceRow | undefined}
    const outcome = await this.ctx.write(async (tx): Promise<Outcome> => {
      const {db} = tx
      const now = this.ctx.now()
      const open = await openFenceQuery(db, input.scope).executeTakeFirst()
      if (open) return {conflict: open}
      const beganAt = input.beganAt ?? now
      const row: FenceRow = {
        id: input.id ?? newId(),
        scope: input.scope,
        state: input.hostAckedAt === undefined ? 'requested' : 'active',
        reason: input.reason,
        ttl_seconds: input.ttlSeconds,
        began_at: beganAt,
        expires_at: input.expiresAt ?? beganAt + input.ttlSeconds * 1000,
        host_acked_at: input.hostAckedAt ?? null,
        ended_at: null,
        end_reason: null,
      }
      return (await tx.insertNew('kit_fences', row)) ? {row} : {conflict: await openFenceQuery(db, input.scope).executeTakeFirst()}
    })
    if (outcome.row) return outcome.row
    const open = outcome.conflict
    throw new KitError(
      'conflict',
      open
        ? `a fence is already open for ${input.scope}: ${open.id} (${open.reason}); end it first with \`edgeworkers fence end ${open.id}\``
        : `fence ${input.id} already exists`,
      'fence_active',
    )
  }

  async getFence(id: string): Promise<FenceRow | undefined> {
    return this.ctx.db.selectFrom('kit_fences').selectAll().where('id', '=', id).executeTakeFirst()
  }

  /** Up to `limit` fence ids starting with `prefix`, in id order: what a short id may mean. */
  fenceIdsWithPrefix(prefix: string, limit: number): Promise<string[]> {
    return idsWithPrefix(this.ctx.db, 'kit_fences', prefix, limit)
  }

  /** The scope's fences, newest first. */
  async listFences(scope: string, limit: number): Promise<FenceRow[]> {
    return this.ctx.db.selectFrom('kit_fences').selectAll().where('scope', '=', scope).orderBy('began_at', 'desc').orderBy('id').limit(limit).execute()
  }

  /** false when the fence is unknown or already ended. The host's clock decides when it expires. */
  async ackFence(id: string, hostExpiresAt?: number): Promise<boolean> {
    return this.ctx.write(async ({db}) => {
      const result = await db
        .updateTable('kit_fences')
        .set({state: 'active', host_acked_at: this.ctx.now(), ...(hostExpiresAt === undefined ? {} : {expires_at: hostExpiresAt})})
        .where('id', '=', id)
        .where('ended_at', 'is', null)
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /** false when the fence is unknown or already ended. */
  async endFence(id: string, endReason: string): Promise<boolean> {
    return this.ctx.write(async ({db}) => {
      const result = await db
        .updateTable('kit_fences')
        .set({state: 'ended', ended_at: this.ctx.now(), end_reason: endReason})
        .where('id', '=', id)
        .where('ended_at', 'is', null)
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /** The scope's open fence (it may have expired on the host: callers compare expires_at). */
  async openFence(scope: string): Promise<FenceRow | undefined> {
    return openFenceQuery(this.ctx.db, scope).executeTakeFirst()
  }

  /** A scope with no row has every gate open. */
  async getGates(scope: string): Promise<GateRow> {
    const row = await this.ctx.db.selectFrom('kit_gates').selectAll().where('scope', '=', scope).executeTakeFirst()
    return row ? toGateRow(row) : {scope, maintenance: false, restore_pending: false, reasons: {}, updated_at: null}
  }

  /** Closes (reason given) or opens (null) one gate of the scope. */
  async setGate(scope: string, gate: GateName, reason: string | null): Promise<GateRow> {
    return this.ctx.atomic(async (tx) => {
      const {db} = tx
      const now = this.ctx.now()
      // Make sure the row exists, then lock it: two gates changed at once must not lose a reason.
      await tx.insertNew('kit_gates', {scope, maintenance: 0, restore_pending: 0, reasons: '{}', updated_at: now})
      const current = await db
        .selectFrom('kit_gates')
        .selectAll()
        .where('scope', '=', scope)
        .$if(this.ctx.locksRows, (q) => q.forUpdate())
        .executeTakeFirstOrThrow()
      const reasons = JSON.parse(current.reasons) as Record<string, string>
      if (reason === null) delete reasons[gate]
      else reasons[gate] = reason
      const row = await db
        .updateTable('kit_gates')
        .set({[gate]: reason === null ? 0 : 1, reasons: JSON.stringify(reasons), updated_at: now})
        .where('scope', '=', scope)
        .returningAll()
        .executeTakeFirstOrThrow()
      return toGateRow(row)
    })
  }
}

function openFenceQuery(db: Kysely<Database>, scope: string) {
  return db.selectFrom('kit_fences').selectAll().where('scope', '=', scope).where('ended_at', 'is', null).orderBy('began_at', 'desc').limit(1)
}

function toGateRow(row: KitGatesTable): GateRow {
  return {
    scope: row.scope,
    maintenance: row.maintenance === 1,
    restore_pending: row.restore_pending === 1,
    reasons: JSON.parse(row.reasons) as Record<string, string>,
    updated_at: row.updated_at,
  }
}
