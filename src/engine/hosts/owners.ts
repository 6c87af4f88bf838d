// Owner hosts in the host reconcile lane (docs/many-hosts.md): every stateful Worker the kit serves
// gets its owner row (a Worker deployed while the kit had one host is owned by that host, the first
// active member), and a host that is not a Worker's owner stops running it and drops its copy.
import type {Store} from '../../store/index.js'
import type {ListedScript} from '../retire/host-listing.js'
import type {FanoutMember, Ownership} from './fanout.js'
import {versionNeedsOwner} from './placement.js'

/** Script name → where it runs, for every Worker of the kit that has (or now gets) an owner. */
export async function ownershipsOf(store: Store, scope: string, members: FanoutMember[]): Promise<Map<string, Ownership>> {
  const rows = new Map((await store.owners.list(scope)).map((row) => [row.script_name, row]))
  const firstActive = members.find((member) => member.row.state === 'active') ?? members[0]
  for (const release of await store.hosts.currentReleases(scope)) {
    if (rows.has(release.script_name) || !firstActive) continue
    const version = await store.workers.getVersion(release.version_id)
    if (version && versionNeedsOwner(version)) rows.set(release.script_name, await store.owners.claim(scope, release.script_name, firstActive.row.host_scope))
  }
  return new Map([...rows].map(([script, row]) => [script, {host: row.host_scope, movingTo: row.moving_to}]))
}

/** The host is where the Worker runs: its owner, or the host a move is copying its data to. */
export function runsHere(ownership: Ownership | undefined, hostScope: string): boolean {
  return ownership === undefined || ownership.host === hostScope || ownership.movingTo === hostScope
}

/**
 * Stops the host running the Workers it lists as running though they are owned elsewhere, and
 * drops their copies: also those a move left to drop here (`released_from`). Returns their names.
 */
export async function releaseForeign(
  store: Store,
  scope: string,
  member: FanoutMember,
  listed: ListedScript[],
  ownerships: Map<string, Ownership>,
): Promise<string[]> {
  const host = member.row.host_scope
  const running = listed.filter((script) => script.state !== 'retired' && !script.handedOver && !runsHere(ownerships.get(script.scriptName), host))
  const released = new Set(running.map((script) => script.scriptName))
  for (const row of await store.owners.list(scope)) if (row.released_from === host) released.add(row.script_name)
  for (const scriptName of released) {
    await member.provider.handOverScript(scriptName)
    await member.provider.dropScriptData(scriptName)
    await store.owners.released(scriptName, host)
  }
  return [...released]
}
