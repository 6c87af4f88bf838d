// Pairing a store with an edge host: exchange the host's one-time code for the shared secret, and
// prove the answer came from the identity key the host advertises (so a man in the middle cannot
// hand the kit a secret of its own). Returns what the store records; the caller saves it.
import {request, type Dispatcher} from 'undici'
import {endpoints} from '../../protocol/endpoints.js'
import {pathOf, type Endpoint} from '../../protocol/endpoint.js'
import {fingerprintOf, kitScopeFor, verifyPairingProof} from '../../protocol/signing.js'
import {KitError} from '../../errors.js'
import type {PairingResult} from '../types.js'
import {parseStrictJson} from '../../util/strict-json.js'

/** `beforeExchange` sees the host's scope before the one-time code is spent, and may refuse by throwing. */
export async function pairWithHost(
  managementUrl: string,
  code: string,
  timeoutMs: number,
  beforeExchange: (scope: string) => Promise<void> = async () => {},
): Promise<PairingResult> {
  let origin: string
  try {
    const url = new URL(managementUrl)
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)')
    origin = url.origin
  } catch {
    throw new KitError('usage', `management URL ${JSON.stringify(managementUrl)} is not an http(s) URL`)
  }
  const identity = endpoints.identity.response.safeParse(await fetchJson(origin, endpoints.identity, undefined, timeoutMs).catch(explainDataPlane(origin)))
  if (!identity.success) throw new KitError('host_error', `${origin} does not answer like an edge host management listener`)
  await beforeExchange(kitScopeFor(identity.data.hostPublicKey))
  const pair = endpoints.pair.response.safeParse(await fetchJson(origin, endpoints.pair, {code}, timeoutMs))
  if (!pair.success) throw new KitError('host_error', `${origin} answered the pairing with an unexpected body`)
  const {secret, hostPublicKey, proof} = pair.data
  if (hostPublicKey !== identity.data.hostPublicKey || !verifyPairingProof(hostPublicKey, code, secret, proof)) {
    throw new KitError('host_error', `the pairing answer from ${origin} is not signed by the host key it advertises; not paired`)
  }
  return {
    scope: kitScopeFor(hostPublicKey),
    host_url: origin,
    host_fingerprint: fingerprintOf(hostPublicKey),
    host_public_key: hostPublicKey,
    shared_secret: secret,
  }
}

/** The data plane answers an unknown path as a missing Worker: the operator gave the public port, not the management one. */
function explainDataPlane(origin: string) {
  return (error: unknown): never => {
    if (error instanceof KitError && error.reason === 'worker_not_found') {
      throw new KitError(
        'usage',
        `${origin} is an edge host's data plane (it answered like a Worker URL), not its management listener: pair with the admin address \`host serve\` prints (setting host.admin_listen, default http://127.0.0.1:8788)`,
      )
    }
    throw error
  }
}

/** The two unsigned calls of pairing; its failures are the operator's to fix, so they are KitErrors. */
async function fetchJson(origin: string, endpoint: Endpoint, body: unknown, timeoutMs: number): Promise<unknown> {
  const target = pathOf(endpoint, {})
  let response: Dispatcher.ResponseData
  try {
    response = await request(`${origin}${target}`, {
      method: endpoint.method,
      headers: body === undefined ? {} : {'content-type': 'application/json'},
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    })
  } catch (error) {
    throw new KitError('host_unreachable', `edge host ${origin} is unreachable: ${(error as {code?: string}).code ?? (error as Error).message}`)
  }
  const text = await response.body.text()
  let data: unknown
  try {
    data = parseStrictJson(text)
  } catch {
    throw new KitError('host_error', `${origin}${target} answered ${response.statusCode} with a body that is not JSON`)
  }
  if (response.statusCode >= 400) {
    const code = (data as {code?: string}).code ?? `http_${response.statusCode}`
    const reason = code === 'pairing_code_invalid' ? 'the pairing code is unknown, used or rotated' : code
    throw new KitError(response.statusCode === 401 ? 'unpaired' : 'host_error', `pairing refused by ${origin}: ${reason}`, code)
  }
  return data
}
