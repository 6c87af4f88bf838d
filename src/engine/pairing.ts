// Pairing the kit's store with an edge host: the one-time code is exchanged with the host (the
// provider checks the host's proof), then the pairing — URL, fingerprint, shared secret — is saved.
import {pairWithHost} from '../provider/onprem/pairing.js'
import type {PairingRow} from '../store/index.js'
import type {Engine} from './context.js'

export async function pairKit(engine: Engine, managementUrl: string, code: string): Promise<PairingRow> {
  const {provider} = engine.settings
  const pairing = await pairWithHost(managementUrl, code, provider.connect_timeout_ms + provider.read_timeout_ms)
  return engine.store.kit.savePairing(pairing)
}
