// Small HTTP helpers shared by the two listeners.
import {once} from 'node:events'
import {chmod, mkdir, rm} from 'node:fs/promises'
import type http from 'node:http'
import path from 'node:path'
import type {AddressInfo} from 'node:net'
import {CLIENT_ADDRESS_HEADER} from '../front/haproxy-config.js'

/** A JSON answer. An oversized request's remaining body is not read: close the connection after. */
export function sendJson(
  response: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  options: {closeConnection?: boolean} = {},
): void {
  const text = JSON.stringify(body)
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...(options.closeConnection ? {connection: 'close'} : {}),
    ...headers,
  })
  response.end(text)
}

/** Connections of the front door (../front/front.ts): the client's address is the header it sets. */
const frontConnections = new WeakSet<object>()

/** `server` is reached only through the front door, which names each request's client in CLIENT_ADDRESS_HEADER. */
export function behindFront(server: http.Server): void {
  server.on('connection', (socket: object) => frontConnections.add(socket))
}

/**
 * The TCP peer; IPv4 clients of a dual-stack socket appear as ::ffff:a.b.c.d. Behind the front door, the client the header
 * names, or, on a fast-path request HAProxy sent again here (its process died under it), the x-forwarded-for HAProxy set.
 */
export function clientAddress(request: http.IncomingMessage): string {
  const fronted = frontConnections.has(request.socket) ? (request.headers[CLIENT_ADDRESS_HEADER] ?? request.headers['x-forwarded-for']) : undefined
  const address = (typeof fronted === 'string' ? fronted : request.socket.remoteAddress) ?? ''
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address
}

export interface ListenAddress {
  host: string
  port: number
}

/** `HOST:PORT` or `[IPv6]:PORT`. */
export function parseListenAddress(text: string): ListenAddress {
  const match = /^(?:\[([0-9a-fA-F:]+)\]|([^:\s]+)):(\d{1,5})$/.exec(text)
  const port = Number(match?.[3])
  if (!match || port > 65_535) throw new Error(`listen address ${JSON.stringify(text)} must be HOST:PORT`)
  return {host: match[1] ?? match[2]!, port}
}

export async function listen(server: http.Server, address: ListenAddress): Promise<ListenAddress> {
  server.listen(address.port, address.host)
  await Promise.race([once(server, 'listening'), once(server, 'error').then(([error]) => Promise.reject(error as Error))])
  const bound = server.address() as AddressInfo
  return {host: address.host, port: bound.port}
}

export function urlOf(address: ListenAddress): string {
  const host = address.host.includes(':') ? `[${address.host}]` : address.host
  return `http://${host}:${address.port}`
}

/** Stops accepting, lets in-flight requests finish for up to `graceMs`, then cuts what is left. */
export async function closeServer(server: http.Server, graceMs: number): Promise<void> {
  if (!server.listening) return
  const closed = new Promise<void>((resolve) => server.close(() => resolve()))
  server.closeIdleConnections()
  const timer = setTimeout(() => server.closeAllConnections(), graceMs)
  // Keep-alive connections go idle once their response is done; close them as they do.
  const sweeper = setInterval(() => server.closeIdleConnections(), 50)
  await closed
  clearTimeout(timer)
  clearInterval(sweeper)
}

/**
 * Listens on a unix socket private to the host user: its directory 0700, the socket 0600 (bind
 * gives it the umask's mode). A socket file left by a host that crashed is replaced: the host lock
 * says no other host runs on this data dir.
 */
export async function listenOnPrivateSocket(server: http.Server, socketPath: string): Promise<void> {
  await mkdir(path.dirname(socketPath), {recursive: true, mode: 0o700})
  await rm(socketPath, {force: true})
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => {
      server.off('error', reject)
      resolve()
    })
  })
  await chmod(socketPath, 0o600)
}
