// The operator's view and moves of a kit's hosts (docs/many-hosts.md): `host list`, `host drain`,
// `host remove`, and each host's health and lag in `host status` / `status`. Every refusal comes
// before anything is written.
import {KitError} from '../../errors.js'
import type {HostMemberRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {requireProvider} from '../provider.js'
import {connectMembers} from './members.js'

/** `current`: confirmed serving every current release; `behind`: missed a change; `unreachable`: did not answer the kit's last call. */
export type HostHealth = 'current' | 'behind' | 'unreachable' | 'unconfirmed'

export interface HostView {
  host: string
  kit: string
  url: string
  publicUrl: string | null
  state: HostMemberRow['state']
  health: HostHealth
  /** Workers of the kit whose current release the host was not confirmed to serve. */
  lag: number
  addedAt: number
  unreachableSince: number | null
  behindSince: number | null
  confirmedAt: number | null
  /** Stateful Workers it owns: they run on it alone (docs/many-hosts.md). */
  owns: string[]
  /** Only when asked to check live: whether the host answered now, and its error. */
  live?: {reachable: boolean; error: string | null}
}

/**
 * The kit's hosts with their health and lag as the store knows them. `live` asks each host too
 * (bounded by `timeoutMs`): `always`, or only for a kit of `several` hosts (one host's status is asked elsewhere).
 */
export async function listKitHosts(engine: Engine, options: {live?: 'always' | 'several'; timeoutMs?: number} = {}): Promise<{kit: string; hosts: HostView[]}> {
  const {scope} = await kitScope(engine)
  const {store} = engine
  const [rows, expected, releases, owners] = await Promise.all([
    store.hosts.listMembers(scope),
    store.hosts.currentReleases(scope),
    store.hosts.releasesOf(scope),
    store.owners.list(scope),
  ])
  const served = new Set(releases.map((release) => `${release.host_scope} ${release.script_name} ${release.release_generation}`))
  const single = rows.length === 1
  const hosts = rows.map((row): HostView => {
    // A kit of one host has nothing to catch up with: it is the store's view (no per-host records kept).
    const lag = single ? 0 : expected.filter((release) => !served.has(`${row.host_scope} ${release.script_name} ${release.release_generation}`)).length
    return {
      host: row.host_scope,
      kit: row.scope,
      url: row.host_url,
      publicUrl: row.public_url,
      state: row.state,
      health: healthOf(row, single),
      lag,
      addedAt: row.added_at,
      unreachableSince: row.unreachable_since,
      behindSince: row.behind_since,
      confirmedAt: row.confirmed_at,
      owns: owners.filter((owner) => owner.host_scope === row.host_scope).map((owner) => owner.script_name),
    }
  })
  if (options.live === 'always' || (options.live === 'several' && !single)) await checkLive(engine, scope, hosts, options.timeoutMs)
  return {kit: scope, hosts}
}

/** What needs an operator in a kit of several hosts: a host down or behind (a kit of one is judged by its own reachability). */
export function hostsReasons(hosts: HostView[]): string[] {
  if (hosts.length < 2) return []
  return hosts.flatMap((host) => {
    if (host.health === 'unreachable' || host.live?.reachable === false) return [`edge host ${host.host} does not answer`]
    return host.health === 'behind' ? [`edge host ${host.host} is behind by ${host.lag} release(s); a reconcile pass catches it up`] : []
  })
}

function healthOf(row: HostMemberRow, single: boolean): HostHealth {
  if (row.unreachable_since !== null) return 'unreachable'
  if (row.behind_since !== null) return 'behind'
  return single || row.confirmed_at !== null ? 'current' : 'unconfirmed'
}

async function checkLive(engine: Engine, scope: string, hosts: HostView[], timeoutMs?: number): Promise<void> {
  const members = await connectMembers(engine.store, engine.settings, engine.hosts, scope)
  await Promise.all(
    hosts.map(async (view) => {
      const member = members.find((candidate) => candidate.row.host_scope === view.host)
      if (!member) return
      try {
        const described = await member.provider.describeHost(timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs))
        view.publicUrl = described.publicUrl
        view.live = {reachable: true, error: null}
      } catch (error) {
        view.live = {reachable: false, error: (error as Error).message}
      }
    }),
  )
}

/** Takes a host out of the balancer: it answers /readyz 503 at once, keeps serving what reaches it, and keeps taking deploys. */
export async function drainHost(engine: Engine, name: string): Promise<{host: HostView; told: boolean; error: string | null}> {
  const {scope, row} = await findHost(engine, name)
  if (row.state === 'draining') throw new KitError('conflict', `host ${row.host_scope} is already draining`)
  await engine.store.hosts.setState(row.host_scope, 'draining')
  const told = await tellHost(engine, scope, row.host_scope)
  return {host: (await viewOf(engine, row.host_scope))!, ...told}
}

/** Ends a drained host's membership: the kit no longer deploys to it or counts it. The host keeps its scripts. */
export async function removeHost(engine: Engine, name: string): Promise<{host: HostView; told: boolean; error: string | null}> {
  const {scope, row, rows} = await findHost(engine, name)
  if (rows.length === 1) throw new KitError('conflict', `host ${row.host_scope} is the kit's only host; \`edgeworkers host unpair\` ends the pairing instead`)
  if (row.state !== 'draining')
    throw new KitError('conflict', `host ${row.host_scope} still takes traffic; drain it first: \`edgeworkers host drain ${row.host_scope}\``)
  const owned = await engine.store.owners.ownedBy(row.host_scope)
  if (owned.length > 0)
    throw new KitError(
      'conflict',
      `host ${row.host_scope} holds the data of ${owned.length} stateful Worker(s) (first: ${owned[0]!.script_name}); move them first (\`edgeworkers worker move <worker> --to <host>\`) or use \`edgeworkers host replace\``,
    )
  const view = (await viewOf(engine, row.host_scope))!
  const told = await tellHost(engine, scope, row.host_scope)
  await engine.store.hosts.removeMember(row.host_scope)
  return {host: view, ...told}
}

/** Tells a host it no longer takes traffic; a host that is down cannot be told (it stays not ready when it returns only if it awaits the kit). */
async function tellHost(engine: Engine, scope: string, hostScope: string): Promise<{told: boolean; error: string | null}> {
  const member = (await connectMembers(engine.store, engine.settings, engine.hosts, scope)).find((candidate) => candidate.row.host_scope === hostScope)
  try {
    await member!.provider.setKitReadiness(false)
    return {told: true, error: null}
  } catch (error) {
    return {told: false, error: (error as Error).message}
  }
}

async function viewOf(engine: Engine, hostScope: string): Promise<HostView | undefined> {
  return (await listKitHosts(engine)).hosts.find((view) => view.host === hostScope)
}

async function kitScope(engine: Engine): Promise<{scope: string}> {
  const {scope} = await requireProvider(engine, "manage the kit's hosts")
  return {scope}
}

/** A host named by its scope (`onprem:<12 hex>`), those 12 hex, or its management URL. */
export async function findHost(engine: Engine, name: string): Promise<{scope: string; row: HostMemberRow; rows: HostMemberRow[]}> {
  const {scope} = await kitScope(engine)
  const rows = await engine.store.hosts.listMembers(scope)
  const wanted = name.trim().replace(/\/+$/, '')
  const row = rows.find((candidate) => candidate.host_scope === wanted || candidate.host_scope === `onprem:${wanted}` || candidate.host_url === wanted)
  if (!row)
    throw new KitError('not_found', `no host ${JSON.stringify(name)} in kit ${scope} (hosts: ${rows.map((candidate) => candidate.host_scope).join(', ')})`)
  return {scope, row, rows}
}
