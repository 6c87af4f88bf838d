// Provider resolution: which edge host this runner talks to, and whether it can. The rule
// distinguishes an invalid provider (misconfiguration: settle `edge_workers_provider_invalid`, or
// skip the pass) from one that cannot be built right now (unpaired: retry later, touch nothing).
import type {Settings} from '../config/schema.js'
import {pairingRefused, type EdgeProvider, type HostConnector, type ProviderError} from '../provider/types.js'
import {KitError} from '../errors.js'
import type {Store} from '../store/index.js'
import type {Engine} from './context.js'
import {kitProvider} from './hosts/members.js'

export type ProviderResolution =
  | {status: 'ready'; provider: EdgeProvider; scope: string}
  | {status: 'unavailable'; code: 'edge_host_unpaired'; message: string}
  | {status: 'invalid'; code: 'edge_workers_provider_invalid'; message: string}

export const PROVIDER_UNAVAILABLE = 'Edge Worker provider is unavailable'

export async function resolveProvider(store: Store, settings: Settings, hosts: HostConnector): Promise<ProviderResolution> {
  const pairings = await store.kit.listActivePairings()
  const wanted = settings.provider.scope
  const candidates = wanted ? pairings.filter((pairing) => pairing.scope === wanted) : pairings
  if (candidates.length === 0) {
    return wanted && (await store.kit.getPairing(wanted))
      ? {status: 'unavailable', code: 'edge_host_unpaired', message: `scope ${wanted} is no longer paired with an edge host`}
      : wanted
        ? {status: 'invalid', code: 'edge_workers_provider_invalid', message: `provider.scope ${wanted} was never paired with this store`}
        : {status: 'unavailable', code: 'edge_host_unpaired', message: 'the store is not paired with an edge host (run `edgeworkers host pair`)'}
  }
  if (candidates.length > 1) {
    const scopes = candidates.map((pairing) => pairing.scope).join(', ')
    return {status: 'invalid', code: 'edge_workers_provider_invalid', message: `the store has several pairings (${scopes}); set provider.scope`}
  }
  const pairing = candidates[0]!
  const provider = await kitProvider(store, settings, hosts, pairing.scope)
  if (!provider) return {status: 'unavailable', code: 'edge_host_unpaired', message: `scope ${pairing.scope} lost its pairing`}
  return {status: 'ready', scope: pairing.scope, provider}
}

/** The paired host of this kit for a command that needs one, or the one-line refusal saying why not. */
export async function requireProvider(engine: Engine, action: string): Promise<{provider: EdgeProvider; scope: string}> {
  const resolution = await engine.resolveProvider()
  if (resolution.status !== 'ready') throw new KitError('unpaired', `cannot ${action}: ${resolution.message}`, resolution.code)
  return {provider: resolution.provider, scope: resolution.scope}
}

/** Why a host that answered 401 cannot be used, and what to do about it. */
export async function pairingRefusedMessage(engine: Engine, error: ProviderError, scope: string): Promise<string> {
  const hostUrl = (await engine.store.kit.getPairing(scope))?.host_url ?? 'its address'
  return `the edge host at ${hostUrl} does not know this kit's pairing (${error.code}); pair it again: \`edgeworkers host pair ${hostUrl} --code CODE --replace\``
}

/** Refuses before anything is written when the paired host answers that it does not know the pairing; an unreachable host passes (a later pass retries). */
export async function assertHostKnowsPairing(engine: Engine, provider: EdgeProvider, scope: string, action: string): Promise<void> {
  try {
    await provider.fenceStatus()
  } catch (error) {
    if (!pairingRefused(error)) return
    const refused = error as ProviderError
    throw new KitError('unpaired', `cannot ${action}: ${await pairingRefusedMessage(engine, refused, scope)}`, refused.code)
  }
}
