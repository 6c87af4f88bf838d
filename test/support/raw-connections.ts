// Raw TCP clients for the connection-budget tests: idle connections, half-sent heads, from any
// loopback address (127.0.0.0/8 is all loopback on Linux, so each test client can be its own address).
import net from 'node:net'

export interface RawConnection {
  socket: net.Socket
  /** Everything the host sent before it closed the connection. */
  closed: Promise<string>
  /** What the host sent so far. */
  received(): string
  isClosed(): boolean
}

/** Connects from `localAddress` and sends `head` (nothing: an idle connection). */
export function rawConnect(url: string, localAddress: string, head = ''): Promise<RawConnection> {
  const {hostname, port} = new URL(url)
  return new Promise((resolve) => {
    let received = ''
    let isClosed = false
    const socket = net.connect({port: Number(port), host: hostname, localAddress})
    const closed = new Promise<string>((settle) =>
      socket.once('close', () => {
        isClosed = true
        settle(received)
      }),
    )
    const connection = {socket, closed, received: () => received, isClosed: () => isClosed}
    socket.on('data', (data) => (received += data.toString('latin1')))
    socket.on('error', () => resolve(connection))
    socket.once('connect', () => {
      if (head) socket.write(head)
      resolve(connection)
    })
  })
}

/** A slowloris client: the start of a head, never its end. */
export const HALF_SENT_HEAD = 'GET / HTTP/1.1\r\nhost: example\r\nx-slow: '

/** The status line of what the host sent ('' when it sent nothing). */
export function statusLine(text: string): string {
  return text.split('\r\n')[0] ?? ''
}
