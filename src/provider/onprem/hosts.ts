// The on-prem HostConnector, which the CLI builds the engine with. Its HTTP clients load only when a
// host is paired or reached: a pass with nothing to do, or a command that never calls a host, skips them.
import type {HostConnector} from '../types.js'

export const onPremHosts: HostConnector = {
  async pair(managementUrl, code, timeoutMs, beforeExchange) {
    const {pairWithHost} = await import('./pairing.js')
    return pairWithHost(managementUrl, code, timeoutMs, beforeExchange)
  },
  async connect(target) {
    const {OnPremProvider} = await import('./client.js')
    return new OnPremProvider(target)
  },
}
