// How the on-prem provider files what went wrong with a call, once, into the engine's ProviderError
// kinds: refused for good, worth retrying, fenced, or ambiguous (it may have been applied).
import {errors as undiciErrors} from 'undici'
import {EDGE_HOST_FENCED, errorStatus} from '../../protocol/management-api.js'
import {parseStrictJson} from '../../util/strict-json.js'
import {ProviderError} from '../types.js'

/** Codes of host answers that end a request for good regardless of the HTTP status family. */
const TERMINAL_CODES = new Set(['edge_host_script_retired'])

export function httpError(status: number, code: string, message: string): ProviderError {
  if (code === EDGE_HOST_FENCED) return new ProviderError('fenced', code, message, status)
  if (TERMINAL_CODES.has(code)) return new ProviderError('terminal', code, message, status)
  if (status === 429 || status >= 500) return new ProviderError('retryable', status === 429 ? 'edge_host_rate_limited' : 'edge_host_5xx', message, status)
  if (status === 401) return new ProviderError('terminal', code === 'edge_host_unpaired' ? code : 'edge_host_unauthorized', message, status)
  if (status >= 300 && status < 400) return new ProviderError('terminal', 'edge_host_redirect', `${message} (redirects are not followed)`, status)
  return new ProviderError('terminal', code in errorStatus ? `edge_host_${code}` : 'edge_host_rejected', message, status)
}

/** Errors raised before any byte was sent cannot have changed anything; the rest may have. */
export function transportError(error: unknown, method: string, target: string): ProviderError {
  const code = (error as {code?: string}).code ?? ''
  const where = `${method} ${target}`
  if (error instanceof undiciErrors.ConnectTimeoutError || ['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(code)) {
    return new ProviderError('retryable', 'edge_host_unreachable', `${where}: edge host unreachable (${code || 'connect timeout'})`)
  }
  const detail =
    error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError ? 'read timeout' : code || (error as Error).name
  return new ProviderError('ambiguous', 'edge_host_no_answer', `${where}: no complete answer from the edge host (${detail})`)
}

export function parseJson(text: string, method: string, target: string, status: number): unknown {
  try {
    return parseStrictJson(text)
  } catch {
    throw new ProviderError('retryable', 'edge_host_bad_response', `${method} ${target}: the edge host answered malformed JSON`, status)
  }
}

export function errorBodyOf(text: string, status: number): {code: string; message: string} {
  try {
    const body = parseStrictJson(text) as {code?: unknown; message?: unknown}
    if (typeof body.code === 'string') return {code: body.code, message: typeof body.message === 'string' ? body.message : ''}
  } catch {
    // Not our host's error shape (a proxy, a crash page): fall back to the status.
  }
  return {code: `http_${status}`, message: ''}
}
