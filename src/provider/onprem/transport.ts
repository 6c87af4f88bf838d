// Requests to the edge host's management API by the endpoint table (src/protocol/endpoints.ts):
// signed unless the table says otherwise, redirects never followed, connect and read timeouts from
// the host target, every answer checked against the endpoint's schema. Failures are filed into the
// engine's ProviderError kinds by ./failures.ts.
import {Agent, request as undiciRequest, type Dispatcher} from 'undici'
import type {z} from 'zod'
import {answerContentTypes, pathOf, type Endpoint, type PathParams, type QueryParams, type RequestBody, type ResponseBody} from '../../protocol/endpoint.js'
import type {ErrorCode} from '../../protocol/management-api.js'
import {signRequest} from '../../protocol/signing.js'
import {ProviderError, type HostTarget} from '../types.js'
import {errorBodyOf, httpError, parseJson, transportError} from './failures.js'

export class ManagementTransport {
  private readonly dispatcher: Dispatcher
  private readonly origin: string

  constructor(private readonly options: HostTarget) {
    this.origin = options.baseUrl.replace(/\/+$/, '')
    this.dispatcher = new Agent({
      connectTimeout: options.connectTimeoutMs,
      headersTimeout: options.readTimeoutMs,
      bodyTimeout: options.readTimeoutMs,
    })
  }

  /** One call whose 2xx answer must match the endpoint's response schema. */
  async call<E extends Endpoint & {response: z.ZodType}>(endpoint: E, request: CallRequest<E>, signal?: AbortSignal): Promise<ResponseBody<E>> {
    const answer = await this.send(endpoint, request, {signal})
    return checked(endpoint, answer!)
  }

  /** Like call, but the error code `absentOn` ("no such thing") answers null instead of failing. */
  async find<E extends Endpoint & {response: z.ZodType}>(
    endpoint: E,
    request: CallRequest<E>,
    absentOn: ErrorCode,
    signal?: AbortSignal,
  ): Promise<ResponseBody<E> | null> {
    const answer = await this.send(endpoint, request, {signal, absentOn})
    return answer && checked(endpoint, answer)
  }

  /**
   * One request and its JSON answer, unchecked; null when the host answered `absentOn`. A request
   * that never reached the host is `retryable`; one that may have been applied (read timeout,
   * connection cut after sending) is `ambiguous`.
   */
  async send<E extends Endpoint>(endpoint: E, request: CallRequest<E>, options: {signal?: AbortSignal; absentOn?: ErrorCode}): Promise<Answer | null> {
    const opened = await this.open(endpoint, request, {signal: options.signal, absentOn: options.absentOn})
    if (opened.response === null) return null
    const {response, method, target} = opened
    const text = await response.body.text().catch((error: unknown) => {
      throw transportError(error, method, target)
    })
    const status = response.statusCode
    return {method, target, status, data: text === '' ? null : parseJson(text, method, target, status)}
  }

  /**
   * Sends the request (signed unless the table says otherwise; every call but a GET carries a JSON
   * body, `{}` when it has nothing to say) and returns a 2xx answer with its body unread. An error
   * answer becomes a ProviderError, or null for `absentOn`.
   */
  async open<E extends Endpoint, A extends ErrorCode | undefined = undefined>(
    endpoint: E,
    request: CallRequest<E>,
    options: {signal?: AbortSignal; bodyTimeout?: number; absentOn?: A},
  ): Promise<A extends ErrorCode ? Opened | {response: null} : Opened> {
    const {params = {}, query, body} = request as {params?: Record<string, string>; query?: Record<string, string | number | null>; body?: unknown}
    const {method} = endpoint
    const target = pathOf(endpoint as Endpoint, params, query)
    const payload = method === 'GET' ? undefined : JSON.stringify(body ?? {})
    const headers: Record<string, string> = {accept: answerContentTypes[endpoint.answer as 'json' | 'ndjson' | 'tar']}
    if (payload !== undefined) headers['content-type'] = 'application/json'
    if (endpoint.signed) Object.assign(headers, signRequest({secret: this.options.secret, method, target, body: payload}))
    let response: Dispatcher.ResponseData
    try {
      response = await undiciRequest(`${this.origin}${target}`, {
        method,
        headers,
        body: payload,
        dispatcher: this.dispatcher,
        signal: options.signal,
        ...(options.bodyTimeout ? {bodyTimeout: options.bodyTimeout} : {}),
      })
    } catch (error) {
      throw transportError(error, method, target)
    }
    const status = response.statusCode
    if (status >= 200 && status < 300) return {response, method, target} as never
    const text = await response.body.text().catch(() => '')
    const {code, message} = errorBodyOf(text, status)
    if (options.absentOn && code === options.absentOn) return {response: null} as never
    throw httpError(status, code, `${method} ${target}: edge host answered ${status} ${code}${message ? `: ${message}` : ''}`)
  }
}

/** The request of a call: path parameters (when the path has any), query and body. */
type CallRequest<E extends Endpoint> = (keyof PathParams<E> extends never ? {params?: PathParams<E>} : {params: PathParams<E>}) & {
  query?: QueryParams<E>
  body?: RequestBody<E>
}

/** A 2xx answer whose body is still to be read. */
export interface Opened {
  response: Dispatcher.ResponseData
  method: string
  target: string
}

interface Answer {
  method: string
  target: string
  status: number
  data: unknown
}

function checked<E extends Endpoint & {response: z.ZodType}>(endpoint: E, answer: Answer): ResponseBody<E> {
  const parsed = endpoint.response.safeParse(answer.data)
  if (!parsed.success)
    throw new ProviderError(
      'retryable',
      'edge_host_bad_response',
      `${answer.method} ${answer.target}: the edge host answered a body this kit does not understand`,
      answer.status,
    )
  return parsed.data as ResponseBody<E>
}
