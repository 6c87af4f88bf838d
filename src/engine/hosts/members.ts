// The hosts of a kit as the engine reaches them (docs/many-hosts.md): each member's own provider,
// and the kit's provider — the one host itself, or the fan-out over several.
import type {Settings} from '../../config/schema.js'
import type {EdgeProvider, HostConnector} from '../../provider/types.js'
import type {HostMemberRow, Store, WorkerOwnerRow} from '../../store/index.js'
import {FanoutProvider, type FanoutMember, type FanoutPlacement, type Ownership} from './fanout.js'

/** Each host of kit `scope` with a provider signed with its own secret (stamping rows with the kit scope). */
export async function connectMembers(store: Store, settings: Settings, hosts: HostConnector, scope: string): Promise<FanoutMember[]> {
  const [rows, secrets] = await Promise.all([store.hosts.listMembers(scope), store.hosts.memberSecrets(scope)])
  const members: FanoutMember[] = []
  // Active hosts first: a read of one host asks them before a draining one.
  for (const row of [...rows].sort((a, b) => Number(a.state === 'draining') - Number(b.state === 'draining'))) {
    const secret = secrets.get(row.host_scope)
    if (secret) members.push({row, provider: await hosts.connect(targetOf(settings, row, scope, secret))})
  }
  return members
}

/** The kit's owner rows as the fan-out reads and claims them. */
export function ownersOf(store: Store, scope: string): FanoutPlacement {
  const ownership = (row: WorkerOwnerRow): Ownership => ({host: row.host_scope, movingTo: row.moving_to})
  return {
    ownerOf: async (scriptName) => {
      const row = await store.owners.get(scriptName)
      return row ? ownership(row) : null
    },
    claim: async (scriptName, hostScope) => ownership(await store.owners.claim(scope, scriptName, hostScope)),
  }
}

function targetOf(settings: Settings, row: HostMemberRow, scope: string, secret: string) {
  return {
    baseUrl: row.host_url,
    scope,
    secret,
    connectTimeoutMs: settings.provider.connect_timeout_ms,
    readTimeoutMs: settings.provider.read_timeout_ms,
  }
}

/** The kit's provider: its one host as is (a single-host kit behaves as it always did), else the fan-out. null: no host left. */
export async function kitProvider(store: Store, settings: Settings, hosts: HostConnector, scope: string): Promise<EdgeProvider | null> {
  const members = await connectMembers(store, settings, hosts, scope)
  if (members.length <= 1) return members[0]?.provider ?? null
  return fanoutOver(store, settings, scope, members)
}

/** The fan-out over `members` of kit `scope`, telling the store what it meets and reading its owner rows. */
export function fanoutOver(store: Store, settings: Settings, scope: string, members: FanoutMember[]): FanoutProvider {
  return new FanoutProvider(
    scope,
    members,
    settings.hosts.unreachable_grace_seconds * 1000,
    () => store.clock.now(),
    {
      unreachable: (hostScope) => store.hosts.markUnreachable(hostScope),
      reached: (hostScope) => store.hosts.markReached(hostScope),
      behind: (hostScope) => store.hosts.markBehind(hostScope),
      ready: (hostScope, scriptName, releaseGeneration) => store.hosts.recordReady(hostScope, scriptName, releaseGeneration),
    },
    ownersOf(store, scope),
  )
}
