// Pairing the kit's store with an edge host: the one-time code is exchanged with the host (the
// provider checks the host's proof), then the pairing — URL, fingerprint, shared secret — is saved.
// A store serves one host at a time: pairing another host replaces the current one only when asked
// (`--replace`), and then its Workers and unfinished rows move to the new host, whose restore gate
// stays closed until a pass has redeployed what it lacks (docs: README "Replacing a host").
import {KitError} from '../errors.js'
import type {PairingRow} from '../store/index.js'
import type {Engine} from './context.js'

export interface PairOutcome {
  pairing: PairingRow
  /** The host this pairing replaced, with how many Workers and unfinished outbox rows moved to the new one. */
  replaced: {scope: string; hostUrl: string; workers: number; rows: number} | null
}

export async function pairKit(engine: Engine, managementUrl: string, code: string, options: {replace?: boolean} = {}): Promise<PairOutcome> {
  const {provider} = engine.settings
  const {store} = engine
  const active = await store.kit.listActivePairings()
  const others = (scope: string) => active.filter((pairing) => pairing.scope !== scope)
  const pairing = await engine.hosts.pair(managementUrl, code, provider.connect_timeout_ms + provider.read_timeout_ms, async (scope) => {
    const current = others(scope)
    if (current.length === 0) return
    const named = current.map((row) => `${row.scope} (${row.host_url})`).join(', ')
    if (!options.replace) {
      throw new KitError(
        'conflict',
        `the store is already paired with ${named}; to move its Workers to this host run the same command with --replace, or \`edgeworkers host unpair\` first`,
      )
    }
    if (current.length > 1) throw new KitError('conflict', `the store is paired with several hosts (${named}); unpair all but the one to replace first`)
  })
  const [old] = others(pairing.scope)
  if (!old) return {pairing: await store.kit.savePairing(pairing), replaced: null}
  const reason = `host ${old.host_url} (${old.scope}) replaced by ${pairing.host_url}: a reconcile pass redeploys its Workers here`
  const moved = await store.kit.replacePairing(pairing, old.scope, reason)
  engine.log.info(
    {from: old.scope, to: pairing.scope, workers: moved.workers, rows: moved.rows},
    'Edge host replaced: Workers and unfinished rows moved to the new host',
  )
  return {pairing: moved.pairing, replaced: {scope: old.scope, hostUrl: old.host_url, workers: moved.workers, rows: moved.rows}}
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
