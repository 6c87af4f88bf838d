// Forwarding one request to the Worker's socket in its shard: an ordinary request streamed both
// ways (proxy), or a WebSocket upgrade spliced after workerd's 101 (tunnel). The routing and the
// checks before it are ./data-plane.ts's.
import http from 'node:http'
import type {Socket} from 'node:net'
import type {Duplex} from 'node:stream'
import type {Dispatcher} from 'undici'
import {SIGNATURE_HEADERS} from '../../protocol/signing.js'
import {clientAddress} from './common.js'
import {CLIENT_ADDRESS_HEADER} from '../front/haproxy-config.js'
import {LOAD_HEADER, WARM_HEADER} from '../../workerd/loader-worker.js'
import type {ScriptRoute} from '../runtime/shard.js'
import {SERVICE_CALLER_HEADER, SERVICE_TARGET_HEADER} from '../../workerd/config.js'

/**
 * Headers never forwarded to a Worker: hop-by-hop ones, the kit's signature, and the ones the host
 * sets itself (a client cannot claim another address in x-forwarded-for).
 */
const NOT_FORWARDED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'host',
  'x-request-id',
  'x-forwarded-for',
  CLIENT_ADDRESS_HEADER,
  SERVICE_TARGET_HEADER,
  SERVICE_CALLER_HEADER,
  LOAD_HEADER,
  WARM_HEADER,
  ...SIGNATURE_HEADERS,
])

/** An upgrade request's connection, and the bytes that came after its head. */
export interface UpgradeRequest {
  socket: Duplex
  head: Buffer
}

/**
 * Streams the request to the script's socket in its shard and the answer back. A dispatch handler
 * rather than `request()`: the response bytes go straight to the client socket, with backpressure,
 * and no intermediate stream per request.
 */
export function proxy(
  dispatcher: Dispatcher,
  request: http.IncomingMessage,
  response: http.ServerResponse,
  forward: ScriptRoute & {path: string; host: string; requestId: string; body: Buffer | http.IncomingMessage | undefined},
  /** Given the means to give the request up (an error, unless the answer has begun). */
  abandonable?: (abandon: () => void) => void,
): Promise<void> {
  const headers: string[] = []
  const raw = request.rawHeaders
  for (let index = 0; index < raw.length; index += 2) {
    if (!NOT_FORWARDED.has(raw[index]!.toLowerCase())) headers.push(raw[index]!, raw[index + 1]!)
  }
  headers.push('host', forward.host, 'x-request-id', forward.requestId, 'x-forwarded-for', clientAddress(request))
  if (forward.loadId !== null) headers.push(LOAD_HEADER, forward.loadId)

  return new Promise<void>((resolve, reject) => {
    let controller: Dispatcher.DispatchController | undefined
    const clientGone = () => {
      if (!response.writableFinished) controller?.abort(new Error('the client went away'))
    }
    response.once('close', clientGone)
    const settle = (error?: Error) => {
      response.off('close', clientGone)
      if (error) reject(error)
      else resolve()
    }
    dispatcher.dispatch(
      {origin: forward.origin, path: forward.path, method: (request.method ?? 'GET') as Dispatcher.HttpMethod, headers, body: forward.body},
      {
        onRequestStart(started) {
          controller = started
          if (response.destroyed) started.abort(new Error('the client went away'))
          abandonable?.(() => {
            if (!response.headersSent) started.abort(new Error('its workerd process was stopped as a runaway'))
          })
        },
        onResponseStart(started, statusCode, upstreamHeaders) {
          if (statusCode < 200) return // informational answers are not relayed
          const outgoing: http.OutgoingHttpHeaders = {}
          for (const [name, value] of Object.entries(upstreamHeaders)) {
            if (value !== undefined && !NOT_FORWARDED.has(name)) outgoing[name] = value
          }
          outgoing['x-request-id'] = forward.requestId
          try {
            response.writeHead(statusCode, outgoing)
          } catch (error) {
            started.abort(error as Error)
          }
        },
        onResponseData(started, chunk) {
          if (!response.write(chunk)) {
            started.pause()
            response.once('drain', () => started.resume())
          }
        },
        onResponseEnd() {
          response.end()
          settle()
        },
        onResponseError(_started, error) {
          settle(error)
        },
      },
    )
  })
}

/**
 * Forwards an upgrade request to the script's socket. On 101 the client gets workerd's answer head
 * and the two connections are spliced until either closes, or until the lease's process retires (it
 * is being replaced). Any other answer is relayed as an ordinary response. Resolves once either happened.
 */
export function tunnel(
  request: http.IncomingMessage,
  response: http.ServerResponse,
  client: UpgradeRequest,
  forward: ScriptRoute & {socketPath: string | undefined; path: string; host: string; requestId: string},
  lease: {retired: Promise<void>; tunnelOpened(): () => void},
  tunnels: Set<Duplex>,
): Promise<void> {
  const headers: Record<string, string> = {}
  const raw = request.rawHeaders
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index]!.toLowerCase()
    if (!NOT_FORWARDED.has(name)) headers[name] = headers[name] === undefined ? raw[index + 1]! : `${headers[name]}, ${raw[index + 1]!}`
  }
  Object.assign(headers, {
    connection: 'Upgrade',
    upgrade: request.headers.upgrade ?? 'websocket',
    host: forward.host,
    'x-request-id': forward.requestId,
    'x-forwarded-for': clientAddress(request),
  })
  if (forward.loadId !== null) headers[LOAD_HEADER] = forward.loadId
  return new Promise<void>((resolve, reject) => {
    if (forward.socketPath === undefined) return reject(Object.assign(new Error('the script has no socket in this process'), {code: 'ENOENT'}))
    const upstream = http.request({socketPath: forward.socketPath, method: request.method, path: forward.path, headers, agent: false})
    upstream.once('error', reject)
    upstream.once('upgrade', (answer: http.IncomingMessage, upstreamSocket: Socket, upstreamHead: Buffer) => {
      const lines = [`HTTP/1.1 101 ${answer.statusMessage || 'Switching Protocols'}`]
      for (let index = 0; index < answer.rawHeaders.length; index += 2) {
        if (answer.rawHeaders[index]!.toLowerCase() !== 'x-request-id') lines.push(`${answer.rawHeaders[index]}: ${answer.rawHeaders[index + 1]}`)
      }
      lines.push(`x-request-id: ${forward.requestId}`)
      const socket = client.socket
      response.statusCode = 101 // for the request metrics; the answer head is written below
      socket.write(`${lines.join('\r\n')}\r\n\r\n`)
      if (upstreamHead.length > 0) socket.write(upstreamHead)
      if (client.head.length > 0) upstreamSocket.write(client.head)
      const closed = lease.tunnelOpened()
      const close = () => {
        closed()
        tunnels.delete(socket)
        tunnels.delete(upstreamSocket)
        socket.destroy()
        upstreamSocket.destroy()
      }
      tunnels.add(socket)
      tunnels.add(upstreamSocket)
      for (const end of [socket, upstreamSocket]) {
        end.once('close', close)
        end.on('error', close)
      }
      void lease.retired.then(close)
      if (socket.destroyed) close() // the client left while the upgrade was on its way
      upstreamSocket.pipe(socket)
      socket.pipe(upstreamSocket)
      resolve()
    })
    upstream.once('response', (answer) => {
      const outgoing: http.OutgoingHttpHeaders = {}
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value !== undefined && !NOT_FORWARDED.has(name)) outgoing[name] = value
      }
      outgoing['x-request-id'] = forward.requestId
      response.writeHead(answer.statusCode ?? 502, outgoing)
      answer.pipe(response)
      answer.once('end', () => resolve())
      answer.once('error', reject)
    })
    upstream.end()
  })
}

/**
 * A request goes again only when it cannot have reached the Worker — replaying one that did would
 * replay whatever crashed the process (a memory bomb crashing its shard once per retry):
 * - the connection never opened (refused, its socket already gone, failed while connecting, or the
 *   process's connection pool was closed because it exited);
 * - a request without body met a reset or a broken pipe. Shards listen on Unix sockets, where the
 *   kernel resets a connection (rather than ending it) only when the peer died leaving data unread
 *   or before accepting it, and refuses writes to a peer already gone: workerd never read that
 *   request whole, so no Worker ran it. One that workerd read and then died ends with an EOF
 *   (UND_ERR_SOCKET), and never goes again.
 * A streamed body cannot be replayed at all.
 */
export function safeToRetry(error: unknown, body: Buffer | http.IncomingMessage | undefined): boolean {
  if (body !== undefined && !Buffer.isBuffer(body)) return false
  const {code, syscall} = error as {code?: string; syscall?: string}
  if (code === 'ECONNREFUSED' || code === 'ENOENT' || code === 'UND_ERR_CLOSED' || syscall === 'connect') return true
  return body === undefined && (code === 'ECONNRESET' || code === 'EPIPE')
}

export function hasBody(request: http.IncomingMessage): boolean {
  return request.headers['content-length'] !== undefined ? request.headers['content-length'] !== '0' : request.headers['transfer-encoding'] !== undefined
}
