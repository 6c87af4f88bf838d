// Client connections of the public and management listeners, bounded so that nothing a client
// holds without authenticating — idle connections, half-sent heads or bodies, pipelined requests —
// can stop another client from being served:
//   - timeouts (Node's own, checked every second): the head within host.header_timeout_ms of the
//     connection or of the previous answer's end, the whole request within request_timeout_ms,
//     an idle keep-alive connection closed after idle_timeout_ms;
//   - one client address (an IPv6 /64) holds at most max_connections_per_address per listener;
//     more are refused: answered 503 too_many_connections and closed, and past one such answer a
//     second, closed as they are accepted (refuseBeforeSockets);
//   - both listeners share one budget of connections sized from the fd limit (./fd-limit.ts): a
//     connection arriving when it is spent closes the connection idle the longest — no request in
//     flight: a keep-alive one between requests, or one that has not finished its head — and is
//     refused only when every held connection is busy;
//   - a connection runs one request at a time (pipelined requests wait their turn), so each holds
//     at most one connection to a shard and the budget bounds the host's descriptors.
import type http from 'node:http'
import {isIPv6, type Socket} from 'node:net'
import type {Duplex} from 'node:stream'
import type {HostMetrics} from '../metrics.js'

export interface ListenerTimeouts {
  headerTimeoutMs: number
  requestTimeoutMs: number
  idleTimeoutMs: number
}

interface Tracked {
  /** The address-cap key: listener and client address. */
  key: string
  /** Requests received and not yet answered; the first runs, the rest wait in `queue`. */
  inFlight: number
  queue: Array<() => void>
  /** A WebSocket (or an upgrade being answered): no longer an HTTP connection the guard may close. */
  upgraded: boolean
}

/** The listening socket's native handle, and the connections it accepts (Node's TCP wraps). */
interface ListeningHandle {
  onconnection?: (status: number, client?: AcceptedHandle) => void
}
interface AcceptedHandle {
  getpeername?: (out: {address?: string}) => number
  close?: () => void
}

/** Descriptors kept for everything but client connections: the state, logs, workerd's pipes and sockets. */
const RESERVED_FDS = 256
const MIN_BUDGET = 64

/**
 * Connections both listeners may hold at once, from the fd limit: each may need a second
 * descriptor for its request's connection to a shard.
 */
export function connectionBudget(fdLimit: number): number {
  return Math.max(MIN_BUDGET, Math.floor((fdLimit - RESERVED_FDS) / 2))
}

const REFUSAL_BODY = JSON.stringify({code: 'too_many_connections', message: 'Too many connections; try again shortly'})
const REFUSAL = Buffer.from(
  [
    'HTTP/1.1 503 Service Unavailable',
    'content-type: application/json',
    `content-length: ${Buffer.byteLength(REFUSAL_BODY)}`,
    'cache-control: no-store',
    'retry-after: 1',
    'connection: close',
    '',
    REFUSAL_BODY,
  ].join('\r\n'),
)

export class ConnectionGuard {
  private readonly connections = new Map<Socket, Tracked>()
  /** Connections with no request in flight, the one idle the longest first (re-added when it goes idle). */
  private readonly idle = new Set<Socket>()
  private readonly perKey = new Map<string, number>()
  /** When each capped address (key) was last refused with an answer. */
  private readonly answeredRefusal = new Map<string, number>()
  private arrivalCount = 0

  constructor(
    private readonly limits: {budget: number; perAddress: number},
    private readonly metrics: HostMetrics,
  ) {}

  get openConnections(): number {
    return this.connections.size
  }

  /** Connections that have arrived on the guarded listeners so far, admitted or refused. */
  get arrivals(): number {
    return this.arrivalCount
  }

  /**
   * Guards `server`: its timeouts, and admission of its connections. Its request listeners are
   * taken over, so that a connection's requests reach them one at a time.
   */
  watch(server: http.Server, listener: string, timeouts: ListenerTimeouts): void {
    server.headersTimeout = timeouts.headerTimeoutMs
    server.requestTimeout = timeouts.requestTimeoutMs
    server.keepAliveTimeout = timeouts.idleTimeoutMs
    const handlers = server.listeners('request') as Array<(request: http.IncomingMessage, response: http.ServerResponse) => void>
    server.removeAllListeners('request')
    server.on('request', (request: http.IncomingMessage, response: http.ServerResponse) => this.request(request, response, handlers))
    // The HTTP server's own connection listener too: a refused connection is closed before it
    // gets a parser, timers and listeners.
    const connectionHandlers = server.listeners('connection') as Array<(socket: Socket) => void>
    server.removeAllListeners('connection')
    server.on('connection', (socket: Socket) => {
      if (!this.admit(socket, listener)) return
      for (const handler of connectionHandlers) handler.call(server, socket)
    })
    server.once('listening', () => this.refuseBeforeSockets(server, listener))
    server.prependListener('upgrade', (_request: http.IncomingMessage, socket: Duplex) => this.upgraded(socket as Socket))
  }

  /**
   * An address past its cap that was answered 503 in the last second has its further connections
   * closed as they are accepted, before Node makes a socket of them: a socket, its stream state
   * and listeners are most of what each of an attacker's thousands of reconnects a second costs
   * the event loop and the heap (a refusal costs about half as much CPU without one, and leaves
   * nothing to collect). The one 503 a second says why to a client that reads it (a proxy's log).
   * This wraps Node's accept callback, the listening handle's `onconnection` (net.js, not a public
   * API): where it is missing, admit() refuses them all, each through a socket.
   */
  private refuseBeforeSockets(server: http.Server, listener: string): void {
    const handle = (server as unknown as {_handle?: ListeningHandle | null})._handle
    const accept = handle?.onconnection
    if (!handle || typeof accept !== 'function') return
    const guard = this
    handle.onconnection = function (this: ListeningHandle, status: number, client?: AcceptedHandle) {
      if (status === 0 && typeof client?.getpeername === 'function' && typeof client.close === 'function') {
        const peer: {address?: string} = {}
        client.getpeername(peer)
        const key = `${listener} ${addressKey(peer.address ?? '')}`
        if ((guard.perKey.get(key) ?? 0) >= guard.limits.perAddress && Date.now() - (guard.answeredRefusal.get(key) ?? 0) < 1_000) {
          guard.arrivalCount++
          guard.metrics.connectionsShed.inc({listener, reason: 'address_cap'})
          client.close()
          return
        }
      }
      accept.call(this, status, client)
    }
  }

  /** Whether `socket` may be served; if not, it was refused. */
  private admit(socket: Socket, listener: string): boolean {
    this.arrivalCount++
    const key = `${listener} ${addressKey(socket.remoteAddress ?? '')}`
    const held = this.perKey.get(key) ?? 0
    if (held >= this.limits.perAddress) {
      this.answeredRefusal.set(key, Date.now())
      this.refuse(socket, listener, 'address_cap')
      return false
    }
    if (this.connections.size >= this.limits.budget) {
      const longestIdle = this.idle.values().next()
      if (longestIdle.done) {
        this.refuse(socket, listener, 'budget')
        return false
      }
      this.metrics.connectionsShed.inc({listener, reason: 'evicted'})
      this.forget(longestIdle.value)
      longestIdle.value.destroy()
    }
    this.connections.set(socket, {key, inFlight: 0, queue: [], upgraded: false})
    this.perKey.set(key, held + 1)
    this.idle.add(socket)
    socket.once('close', () => this.forget(socket))
    return true
  }

  /** Answers 503 and closes; closed in this same turn, the connection cannot deliver a request. */
  private refuse(socket: Socket, listener: string, reason: 'address_cap' | 'budget'): void {
    this.metrics.connectionsShed.inc({listener, reason})
    socket.on('error', () => {})
    socket.write(REFUSAL)
    socket.destroy()
  }

  private forget(socket: Socket): void {
    const tracked = this.connections.get(socket)
    if (!tracked) return
    this.connections.delete(socket)
    this.idle.delete(socket)
    const held = (this.perKey.get(tracked.key) ?? 1) - 1
    if (held === 0) {
      this.perKey.delete(tracked.key)
      this.answeredRefusal.delete(tracked.key)
    } else this.perKey.set(tracked.key, held)
  }

  private request(
    request: http.IncomingMessage,
    response: http.ServerResponse,
    handlers: ReadonlyArray<(request: http.IncomingMessage, response: http.ServerResponse) => void>,
  ): void {
    const run = () => {
      for (const handler of handlers) handler(request, response)
    }
    const socket = request.socket
    const tracked = this.connections.get(socket)
    if (!tracked) {
      run()
      return
    }
    this.idle.delete(socket)
    tracked.inFlight++
    response.once('close', () => {
      tracked.inFlight--
      // A connection that closed with requests still waiting: nobody is left to answer them.
      if (socket.destroyed) tracked.queue.length = 0
      tracked.queue.shift()?.()
      if (tracked.inFlight === 0 && !tracked.upgraded && this.connections.has(socket)) this.idle.add(socket)
    })
    if (tracked.inFlight === 1) run()
    else tracked.queue.push(run)
  }

  private upgraded(socket: Socket): void {
    const tracked = this.connections.get(socket)
    if (!tracked) return
    tracked.upgraded = true
    this.idle.delete(socket)
  }
}

/** Whom the address cap counts: an IPv4 address, or the /64 of an IPv6 one (a client holds a whole /64). */
export function addressKey(address: string): string {
  const bare = address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address
  if (!isIPv6(bare)) return bare
  const [head = '', tail = ''] = bare.split('::')
  const headGroups = head === '' ? [] : head.split(':')
  const tailGroups = bare.includes('::') ? (tail === '' ? [] : tail.split(':')) : []
  const groups = [...headGroups, ...Array(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups]
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`
}
