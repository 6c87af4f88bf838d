// Bringing each host of a multi-host kit current, once per pass (docs/many-hosts.md): the host
// reconcile lane lists every host's scripts, redeploys the current release of every Worker the host
// lacks (the deploy task aimed at that host alone), retires there what the store retired, and only
// when nothing differs confirms the host current — its /readyz may then say ready — and records what
// it serves. A host that restarted after missing deploys therefore takes no traffic for stale code.
// Before the host is confirmed, its fence is brought to the kit's and each Worker's control state
// (policy, keys, secrets, …) is copied from a host that took every control write
// (./control-catch-up.ts): it never serves under a policy or with secrets the kit has replaced.
// A stateful Worker runs on its owner alone (./owners.ts): another host holds its release, never runs it;
// a move a crash left under way is finished first (./move.ts).
import {KitError} from '../../errors.js'
import {ProviderError} from '../../provider/types.js'
import type {CurrentRelease} from '../../store/index.js'
import type {Engine} from '../context.js'
import {redeployVersion} from '../backup/verify.js'
import type {DeployTaskResult} from '../deploy/task.js'
import {listHostScripts, type ListedScript} from '../retire/host-listing.js'
import {connectMembers, fanoutOver} from './members.js'
import {hostDown, type FanoutMember, type Ownership} from './fanout.js'
import {alignFence, copyControlState, copySources} from './control-catch-up.js'
import {finishMoves} from './move.js'
import {ownershipsOf, releaseForeign} from './owners.js'

/** Dedupe keys of the deploy rows a catch-up enqueues. */
export const HOST_CATCH_UP_KEY_PREFIX = 'host-catchup:'

export interface HostCatchUp {
  host: string
  /** `current`: confirmed this pass; `behind`: still lacks releases; `unreachable`: did not answer the listing. */
  state: 'current' | 'behind' | 'unreachable'
  redeployed: Array<{scriptName: string; releaseGeneration: string; outcome: DeployTaskResult['outcome']}>
  retired: string[]
  /** Workers whose control state was copied to the host from a current one. */
  controlCopied: string[]
  /** Workers owned by another host that this one ran or still held data of: handed over, data dropped. */
  released: string[]
  /** Scripts still differing from the store after this pass. */
  lacking: number
  error: string | null
}

export interface CatchUpOptions {
  shouldStop?: () => boolean
  onRedeployed?: (result: DeployTaskResult) => void
}

/** Does nothing for a kit of one host: that host is the store's view, as it always was. */
export async function catchUpHosts(engine: Engine, scope: string, options: CatchUpOptions = {}): Promise<HostCatchUp[]> {
  const members = await connectMembers(engine.store, engine.settings, engine.hosts, scope)
  if (members.length <= 1) return []
  await finishMoves(engine, scope)
  const ownerships = await ownershipsOf(engine.store, scope, members)
  const results: HostCatchUp[] = []
  for (const member of members) {
    if (options.shouldStop?.()) break
    results.push(await catchUpHost(engine, scope, members, member, ownerships, options))
  }
  return results
}

async function catchUpHost(
  engine: Engine,
  scope: string,
  members: FanoutMember[],
  member: FanoutMember,
  ownerships: Map<string, Ownership>,
  options: CatchUpOptions,
): Promise<HostCatchUp> {
  const {store, settings} = engine
  const host = member.row.host_scope
  const result: HostCatchUp = {host, state: 'behind', redeployed: [], retired: [], controlCopied: [], released: [], lacking: 0, error: null}
  const list = () =>
    listHostScripts(member.provider, settings.host_reconcile.listing_max_pages, AbortSignal.timeout(settings.host_reconcile.pass_timeout_seconds * 1000))
  let listed: ListedScript[]
  try {
    listed = await list()
    const described = await member.provider.describeHost()
    if (described.publicUrl !== member.row.public_url) await store.hosts.setPublicUrl(host, described.publicUrl)
    await store.hosts.markReached(host)
  } catch (error) {
    if (!(error instanceof KitError) && !(error instanceof ProviderError)) throw error
    // Down, or answering but refusing (unpaired): either way it cannot be brought current now.
    if (hostDown(error) || (error instanceof KitError && error.code === 'host_unreachable')) await store.hosts.markUnreachable(host)
    return {...result, state: 'unreachable', error: error.message}
  }
  try {
    return await bringCurrent(engine, scope, members, member, {listed, list, result, ownerships}, options)
  } catch (error) {
    // A refusal on the way (a copy the host would not take, no current host to copy from): not ready yet.
    if (!(error instanceof KitError) && !(error instanceof ProviderError)) throw error
    await store.hosts.markBehind(host)
    return {...result, error: error.message}
  }
}

async function bringCurrent(
  engine: Engine,
  scope: string,
  members: FanoutMember[],
  member: FanoutMember,
  pass: {listed: ListedScript[]; list: () => Promise<ListedScript[]>; result: HostCatchUp; ownerships: Map<string, Ownership>},
  options: CatchUpOptions,
): Promise<HostCatchUp> {
  const {store, settings, log} = engine
  const {list, result, ownerships} = pass
  const host = member.row.host_scope
  let listed = pass.listed
  const fence = await alignFence(store, scope, member.provider)
  if (fence !== null) throw new KitError('gate_closed', `the kit is inside backup fence ${fence}; the host catches up once it ends`)

  // A Worker moving here is the move's to bring (./move.ts): this lane leaves it alone.
  const movingHere = (scriptName: string) => ownerships.get(scriptName)?.movingTo === host
  const expected = (await store.hosts.currentReleases(scope)).filter((release) => !movingHere(release.script_name))
  // The deploy task, its provider the fan-out over this one host: the rest of the kit already serves
  // these releases; a Worker owned elsewhere is handed over here first, held, never run.
  const hostEngine: Engine = {...engine, resolveProvider: async () => ({status: 'ready', provider: fanoutOver(store, settings, scope, [member]), scope})}
  result.released = await releaseForeign(store, scope, member, listed, ownerships)
  for (const release of lacking(expected, listed)) {
    if (options.shouldStop?.()) break
    const [worker, version] = await Promise.all([store.workers.get(release.worker_id), store.workers.getVersion(release.version_id)])
    if (!worker || !version) continue
    const outcome = await redeployVersion(hostEngine, scope, worker, version, `${HOST_CATCH_UP_KEY_PREFIX}${host}:`)
    options.onRedeployed?.(outcome)
    result.redeployed.push({scriptName: release.script_name, releaseGeneration: release.release_generation, outcome: outcome.outcome})
  }
  const serving = listed.filter((script) => script.state !== 'retired').map((script) => script.scriptName)
  for (const scriptName of await store.hosts.retiredScripts(scope, serving)) {
    await member.provider.retireScript(scriptName)
    result.retired.push(scriptName)
  }

  if (result.redeployed.length > 0) listed = await list()
  const current = (await store.hosts.currentReleases(scope)).filter((release) => !movingHere(release.script_name))
  const stillLacking = lacking(current, listed)
  const control = stillLacking.length > 0 ? {copied: [], differing: []} : await copyControlState(member, copySources(members, member), current)
  result.controlCopied = control.copied
  result.lacking = stillLacking.length + control.differing.length
  if (result.lacking > 0) {
    await store.hosts.markBehind(host)
    log.warn({host, lacking: result.lacking}, `edge host ${host} still lacks ${result.lacking} release(s) or control state(s); it stays not ready`)
    return result
  }
  // A draining host is kept current but stays out of the balancer.
  if (member.row.state === 'active') await member.provider.setKitReadiness(true)
  await store.hosts.confirmCurrent(host, current)
  return {...result, state: 'current'}
}

/** The current releases the host's listing does not show it serving. */
function lacking(expected: CurrentRelease[], listed: ListedScript[]): CurrentRelease[] {
  const served = new Map(listed.filter((script) => script.state !== 'retired').map((script) => [script.scriptName, script.releaseGeneration]))
  return expected.filter((release) => served.get(release.script_name) !== release.release_generation)
}
