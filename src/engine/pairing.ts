// Pairing the kit's store with an edge host: the one-time code is exchanged with the host (the
// provider checks the host's proof), then the pairing — URL, fingerprint, shared secret — is saved.
import type {Settings} from '../config/schema.js'
import {pairWithHost} from '../provider/onprem/pairing.js'
import type {PairingRow, Store} from '../store/index.js'

export async function pairKit(store: Store, settings: Settings, managementUrl: string, code: string): Promise<PairingRow> {
  const pairing = await pairWithHost(managementUrl, code, settings.provider.connect_timeout_ms + settings.provider.read_timeout_ms)
  return store.kit.savePairing(pairing)
}
