// The edge hosts of each kit (docs/many-hosts.md): who they are, their state (active | draining),
// their health as the kit last saw it, and which release each was last confirmed to serve. The
// shared secrets are read only through memberSecrets(); every other read leaves them out.
import {sql} from 'kysely'
import {KitError} from '../../errors.js'
import type {StoreContext} from '../context.js'
import type {HostMemberRow, HostMemberState} from '../schema.js'
import type {PairingInput} from './kit.js'

const memberColumns = [
  'host_scope',
  'scope',
  'host_url',
  'host_fingerprint',
  'host_public_key',
  'public_url',
  'state',
  'added_at',
  'removed_at',
  'unreachable_since',
  'behind_since',
  'confirmed_at',
  'checked_at',
] as const

export interface CurrentRelease {
  worker_id: string
  version_id: string
  script_name: string
  release_generation: string
}

export interface HostRelease {
  host_scope: string
  script_name: string
  release_generation: string
  ready_at: number
}

/**
 * Makes the paired host `pairing` a member of kit `scope` (or updates it), active and not yet
 * confirmed current. Used in the caller's transaction by the kit's own pairing writes too.
 */
export async function upsertMember(ctx: StoreContext, scope: string, pairing: PairingInput, publicUrl: string | null): Promise<HostMemberRow> {
  const now = ctx.now()
  const row = {
    host_scope: pairing.scope,
    scope,
    host_url: pairing.host_url,
    host_fingerprint: pairing.host_fingerprint,
    host_public_key: pairing.host_public_key,
    shared_secret: pairing.shared_secret,
    public_url: publicUrl,
    state: 'active' as const,
    added_at: now,
    removed_at: null,
    unreachable_since: null,
    behind_since: null,
    confirmed_at: null,
    checked_at: null,
  }
  await ctx.db
    .insertInto('kit_hosts')
    .values(row)
    .onConflict((oc) => oc.column('host_scope').doUpdateSet(row))
    .execute()
  // A host that comes back into a kit has to prove again which releases it serves.
  await ctx.db.deleteFrom('kit_host_releases').where('host_scope', '=', pairing.scope).execute()
  const {shared_secret: _secret, ...member} = row
  return member
}

export class HostsRepository {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Adds a newly paired host to kit `scope`. Refused when the host is a member of another kit: a
   * host serves one kit's Workers only (remove it there first).
   */
  async addMember(scope: string, pairing: PairingInput, publicUrl: string | null): Promise<HostMemberRow> {
    return this.ctx.atomic(async (ctx) => {
      const current = await new HostsRepository(ctx).getMember(pairing.scope)
      if (current && current.removed_at === null && current.scope !== scope) {
        throw new KitError('conflict', `host ${pairing.scope} (${pairing.host_url}) belongs to kit ${current.scope}; remove it there first`)
      }
      return upsertMember(ctx, scope, pairing, publicUrl)
    })
  }

  async getMember(hostScope: string): Promise<HostMemberRow | undefined> {
    return this.ctx.db.selectFrom('kit_hosts').select(memberColumns).where('host_scope', '=', hostScope).executeTakeFirst()
  }

  /** The kit's hosts (not removed), in the order they joined. */
  async listMembers(scope: string): Promise<HostMemberRow[]> {
    return this.ctx.db
      .selectFrom('kit_hosts')
      .select(memberColumns)
      .where('scope', '=', scope)
      .where('removed_at', 'is', null)
      .orderBy('added_at')
      .orderBy('host_scope')
      .execute()
  }

  /** host scope → the secret that signs its management requests, for the kit's hosts. */
  async memberSecrets(scope: string): Promise<Map<string, string>> {
    const rows = await this.ctx.db
      .selectFrom('kit_hosts')
      .select(['host_scope', 'shared_secret'])
      .where('scope', '=', scope)
      .where('removed_at', 'is', null)
      .execute()
    return new Map(rows.map((row) => [row.host_scope, row.shared_secret]))
  }

  /** false when the host is not a member (any more). */
  async setState(hostScope: string, state: HostMemberState): Promise<boolean> {
    return this.update(hostScope, {state})
  }

  /** Ends the host's membership; the kit forgets which releases it served. */
  async removeMember(hostScope: string): Promise<boolean> {
    return this.ctx.atomic(async (ctx) => {
      await ctx.db.deleteFrom('kit_host_releases').where('host_scope', '=', hostScope).execute()
      return new HostsRepository(ctx).update(hostScope, {removed_at: ctx.now()})
    })
  }

  /** The host did not answer: unreachable since the first time it did not (kept while it stays down). */
  async markUnreachable(hostScope: string): Promise<void> {
    const now = this.ctx.now()
    await this.update(hostScope, {unreachable_since: sql<number>`coalesce(unreachable_since, ${now})`, checked_at: now})
  }

  async markReached(hostScope: string): Promise<void> {
    await this.update(hostScope, {unreachable_since: null, checked_at: this.ctx.now()})
  }

  /** The host missed a change the others took (it was skipped): behind until a pass confirms it current. */
  async markBehind(hostScope: string): Promise<void> {
    await this.update(hostScope, {behind_since: sql<number>`coalesce(behind_since, ${this.ctx.now()})`})
  }

  /** The kit confirmed the host current: it serves `releases`, the current release of every Worker it should. */
  async confirmCurrent(hostScope: string, releases: Array<{script_name: string; release_generation: string}>): Promise<void> {
    await this.ctx.atomic(async (ctx) => {
      const repository = new HostsRepository(ctx)
      for (const release of releases) await repository.recordReady(hostScope, release.script_name, release.release_generation)
      await repository.update(hostScope, {behind_since: null, confirmed_at: ctx.now()})
    })
  }

  /** The host answered that it serves this release of the script. */
  async recordReady(hostScope: string, scriptName: string, releaseGeneration: string): Promise<void> {
    const row = {host_scope: hostScope, script_name: scriptName, release_generation: releaseGeneration, ready_at: this.ctx.now()}
    await this.ctx.write(({db}) =>
      db
        .insertInto('kit_host_releases')
        .values(row)
        .onConflict((oc) => oc.columns(['host_scope', 'script_name']).doUpdateSet({release_generation: releaseGeneration, ready_at: row.ready_at}))
        .execute(),
    )
  }

  /** What each host of the kit was last confirmed to serve. */
  async releasesOf(scope: string): Promise<HostRelease[]> {
    return this.ctx.db
      .selectFrom('kit_host_releases as r')
      .innerJoin('kit_hosts as h', 'h.host_scope', 'r.host_scope')
      .select(['r.host_scope', 'r.script_name', 'r.release_generation', 'r.ready_at'])
      .where('h.scope', '=', scope)
      .where('h.removed_at', 'is', null)
      .orderBy('r.host_scope')
      .orderBy('r.script_name')
      .execute()
  }

  /** The release every Worker the kit serves should be serving on each of its hosts (retiring ones aside). */
  async currentReleases(scope: string): Promise<CurrentRelease[]> {
    return this.ctx.db
      .selectFrom('edge_workers as w')
      .innerJoin('edge_worker_versions as v', 'v.id', 'w.current_version_id')
      .select(['w.id as worker_id', 'v.id as version_id', 'w.script_name', 'v.release_generation'])
      .where('w.serving_scope', '=', scope)
      .where('w.retired_at', 'is', null)
      .where('w.status', '<>', 'retired')
      .where('v.state', '=', 'deployed')
      .orderBy('w.script_name')
      .execute()
  }

  /** Of `scriptNames`, those of the kit's Workers that are retired (a host that was down may still serve them). */
  async retiredScripts(scope: string, scriptNames: string[]): Promise<string[]> {
    if (scriptNames.length === 0) return []
    const rows = await this.ctx.db
      .selectFrom('edge_workers')
      .select('script_name')
      .where('serving_scope', '=', scope)
      .where('script_name', 'in', scriptNames)
      .where((eb) => eb.or([eb('status', '=', 'retired'), eb('retired_at', 'is not', null)]))
      .execute()
    return rows.map((row) => row.script_name)
  }

  async setPublicUrl(hostScope: string, publicUrl: string): Promise<void> {
    await this.update(hostScope, {public_url: publicUrl})
  }

  private async update(hostScope: string, values: Record<string, unknown>): Promise<boolean> {
    return this.ctx.write(async ({db}) => {
      const result = await db.updateTable('kit_hosts').set(values).where('host_scope', '=', hostScope).where('removed_at', 'is', null).executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }
}
