// What `host status` and the TUI show about the paired edge host: pairing, reachability, shards
// and script counts. Never throws for an unreachable host — that is part of the answer.
import type {Engine} from './context.js'
import {pairingRefused, type HostInventory, type ProviderError} from '../provider/types.js'
import {pairingRefusedMessage} from './provider.js'
import {listKitHosts, type HostView} from './hosts/manage.js'
import type {PairingRow} from '../store/index.js'

export interface HostStatus {
  /** The store holds a usable pairing and the host knows it. */
  paired: boolean
  pairing: Omit<PairingRow, 'unpaired_at'> | null
  /** Why the provider cannot be used, when it cannot. */
  problem: string | null
  reachable: boolean
  publicUrl: string | null
  scripts: {active: number; locked_down: number; retired: number} | null
  shards: Array<{index: number; state: string; scripts: number; restarts: number}> | null
  fence: {fenceId: string; expiresAt: number} | null
  /** Scripts the host quarantined after runaway incidents (refused with 503 until their next deploy). */
  quarantined: HostInventory['quarantined'] | null
  error: string | null
  /** Every host of the kit with its health and lag (docs/many-hosts.md); the fields above describe the first that answers. */
  hosts: HostView[]
}

/** `timeoutMs` bounds the host calls (the live view must not wait on a hung host); the provider's own timeouts otherwise. */
export async function hostStatus(engine: Engine, options: {timeoutMs?: number} = {}): Promise<HostStatus> {
  const resolution = await engine.resolveProvider()
  if (resolution.status !== 'ready') {
    return {
      paired: false,
      pairing: null,
      problem: resolution.message,
      reachable: false,
      publicUrl: null,
      scripts: null,
      shards: null,
      fence: null,
      quarantined: null,
      error: null,
      hosts: [],
    }
  }
  const pairing = (await engine.store.kit.getPairing(resolution.scope)) ?? null
  const {hosts} = await listKitHosts(engine, {live: 'several', timeoutMs: options.timeoutMs})
  const base = {paired: true, pairing, problem: null, hosts}
  const signal = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs)
  try {
    const [host, inventory] = await Promise.all([resolution.provider.describeHost(signal), resolution.provider.inventory(signal)])
    const scripts = {active: 0, locked_down: 0, retired: 0}
    for (const script of inventory.scripts) scripts[script.state] += 1
    const fence = inventory.activeFence ? {fenceId: inventory.activeFence.fenceId, expiresAt: inventory.activeFence.expiresAt} : null
    return {...base, reachable: true, publicUrl: host.publicUrl, scripts, shards: inventory.shards, fence, quarantined: inventory.quarantined, error: null}
  } catch (error) {
    // The host answers, but not to this kit: it is as good as unpaired, and pairing again is the fix.
    if (pairingRefused(error)) {
      const problem = await pairingRefusedMessage(engine, error as ProviderError, resolution.scope)
      return {...base, paired: false, problem, reachable: true, publicUrl: null, scripts: null, shards: null, fence: null, quarantined: null, error: null}
    }
    const message = signal?.aborted ? `the edge host did not answer within ${options.timeoutMs} ms` : (error as Error).message
    return {...base, reachable: false, publicUrl: null, scripts: null, shards: null, fence: null, quarantined: null, error: message}
  }
}
