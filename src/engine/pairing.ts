// Pairing the kit's store with an edge host: the one-time code is exchanged with the host (the
// provider checks the host's proof), then the pairing — URL, fingerprint, shared secret — is saved.
// Pairing another host is refused unless asked: `--add` makes it one more host of the kit (docs/many-hosts.md;
// the next pass catches it up), `--replace` moves the Workers and unfinished rows to it, whose restore
// gate stays closed until a pass has redeployed what it lacks (docs: README "Replacing a host").
import {KitError} from '../errors.js'
import type {PairingResult} from '../provider/types.js'
import type {PairingRow} from '../store/index.js'
import type {Engine} from './context.js'

export interface PairOutcome {
  pairing: PairingRow
  /** With --add: the kit the host joined (its scope stays the kit's). */
  joined: {kitScope: string; hosts: number} | null
  /** The host this pairing replaced, with how many Workers and unfinished outbox rows moved to the new one. */
  replaced: {scope: string; hostUrl: string; workers: number; rows: number} | null
}

export async function pairKit(engine: Engine, managementUrl: string, code: string, options: {replace?: boolean; add?: boolean} = {}): Promise<PairOutcome> {
  const {provider} = engine.settings
  const {store} = engine
  if (options.replace && options.add) throw new KitError('usage', '--add and --replace exclude each other: a host either joins the kit or replaces its host')
  const active = await store.kit.listActivePairings()
  const others = (scope: string) => active.filter((pairing) => pairing.scope !== scope)
  if (options.add && active.length > 1)
    throw new KitError('conflict', `the store has several kits (${active.map((row) => row.scope).join(', ')}); --add needs one`)
  const kit = options.add ? active[0] : undefined
  const pairing = await engine.hosts.pair(managementUrl, code, provider.connect_timeout_ms + provider.read_timeout_ms, async (scope) => {
    if (kit) return assertMayJoin(engine, kit.scope, scope)
    const current = others(scope)
    if (current.length === 0) return
    const named = current.map((row) => `${row.scope} (${row.host_url})`).join(', ')
    if (!options.replace) {
      throw new KitError(
        'conflict',
        `the store is already paired with ${named}; to move its Workers to this host run the same command with --replace, to add it as one more host --add, or \`edgeworkers host unpair\` first`,
      )
    }
    if (current.length > 1) throw new KitError('conflict', `the store is paired with several hosts (${named}); unpair all but the one to replace first`)
  })
  if (kit && kit.scope !== pairing.scope) return joinKit(engine, kit.scope, pairing)
  const [old] = others(pairing.scope)
  if (!old) return {pairing: await store.kit.savePairing(pairing), replaced: null, joined: null}
  const reason = `host ${old.host_url} (${old.scope}) replaced by ${pairing.host_url}: a reconcile pass redeploys its Workers here`
  const moved = await store.kit.replacePairing(pairing, old.scope, reason)
  engine.log.info(
    {from: old.scope, to: pairing.scope, workers: moved.workers, rows: moved.rows},
    'Edge host replaced: Workers and unfinished rows moved to the new host',
  )
  return {pairing: moved.pairing, replaced: {scope: old.scope, hostUrl: old.host_url, workers: moved.workers, rows: moved.rows}, joined: null}
}

/** Refused before the code is spent: a host of another kit of this store. */
async function assertMayJoin(engine: Engine, kitScope: string, hostScope: string): Promise<void> {
  const member = await engine.store.hosts.getMember(hostScope)
  if (member && member.removed_at === null && member.scope !== kitScope) {
    throw new KitError('conflict', `host ${hostScope} (${member.host_url}) belongs to kit ${member.scope}; remove it there first`)
  }
}

/** The newly paired host joins kit `kitScope`: it holds none of the kit's Workers yet, so it is behind until a pass catches it up. */
async function joinKit(engine: Engine, kitScope: string, pairing: PairingResult): Promise<PairOutcome> {
  const connected = await engine.hosts.connect({
    baseUrl: pairing.host_url,
    scope: kitScope,
    secret: pairing.shared_secret,
    connectTimeoutMs: engine.settings.provider.connect_timeout_ms,
    readTimeoutMs: engine.settings.provider.read_timeout_ms,
  })
  const publicUrl = (await connected.describeHost().catch(() => null))?.publicUrl ?? null
  const member = await engine.store.hosts.addMember(kitScope, pairing, publicUrl)
  await engine.store.hosts.markBehind(member.host_scope)
  const hosts = (await engine.store.hosts.listMembers(kitScope)).length
  engine.log.info({kit: kitScope, host: member.host_scope, hosts}, 'Edge host added to the kit: the next reconcile pass brings it current')
  const {scope, host_url, host_fingerprint, host_public_key, added_at} = member
  return {pairing: {scope, host_url, host_fingerprint, host_public_key, paired_at: added_at, unpaired_at: null}, replaced: null, joined: {kitScope, hosts}}
}

/** Ends the store's pairing with a host (the only one, or `scope`). The host keeps its side; `host pairing-code --rotate` there issues a new code. */
export async function unpairKit(engine: Engine, scope?: string): Promise<PairingRow> {
  const active = await engine.store.kit.listActivePairings()
  const target = scope ? active.find((pairing) => pairing.scope === scope) : active.length === 1 ? active[0] : undefined
  if (!target) {
    if (scope || active.length === 0) throw new KitError('not_found', scope ? `scope ${scope} is not paired` : 'the store is not paired with an edge host')
    throw new KitError('usage', `the store is paired with several hosts (${active.map((pairing) => pairing.scope).join(', ')}); name the scope to unpair`)
  }
  await engine.store.kit.unpair(target.scope)
  return target
}
