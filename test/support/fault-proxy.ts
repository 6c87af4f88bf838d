// A man-in-the-middle between the kit's provider and a real edge host, for the network faults a
// real peer cannot be asked to produce on cue: a 5xx, a connection cut after the host applied the
// request, a probe that never succeeds. Everything not matched by the current rule is forwarded.
import http from 'node:http'
import type {AddressInfo} from 'node:net'

export type ProxyAction =
  | {kind: 'forward'}
  /** Answer this instead of forwarding. */
  | {kind: 'answer'; status: number; body: unknown}
  /** Forward, let the host apply it, then cut the client connection without an answer. */
  | {kind: 'forward_then_cut'}
  /** Run a side effect, then forward. */
  | {kind: 'before_forward'; run: () => Promise<void>}

export type ProxyRule = (request: {method: string; url: string}) => ProxyAction

export class FaultProxy {
  rule: ProxyRule = () => ({kind: 'forward'})
  readonly seen: Array<{method: string; url: string}> = []
  private server?: http.Server
  private port = 0

  constructor(private readonly upstream: () => string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`
  }

  async start(): Promise<this> {
    this.server = http.createServer((request, response) => void this.handle(request, response))
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve))
    this.port = (this.server.address() as AddressInfo).port
    return this
  }

  /** The host goes down: the port refuses connections (ECONNREFUSED) until `up`. */
  async down(): Promise<void> {
    await this.stop()
  }

  /** The host is back, on the same address (nothing to do while it is up). */
  async up(): Promise<void> {
    if (!this.server?.listening) await this.start()
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections()
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()))
  }

  private async handle(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const target = {method: request.method ?? 'GET', url: request.url ?? '/'}
    this.seen.push(target)
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const action = this.rule(target)
    if (action.kind === 'answer') {
      response.writeHead(action.status, {'content-type': 'application/json'}).end(JSON.stringify(action.body))
      return
    }
    if (action.kind === 'before_forward') await action.run()
    const upstream = await fetch(`${this.upstream()}${target.url}`, {
      method: target.method,
      headers: Object.fromEntries(Object.entries(request.headers).filter(([name]) => !['host', 'connection', 'content-length'].includes(name))) as Record<
        string,
        string
      >,
      body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
    })
    const body = Buffer.from(await upstream.arrayBuffer())
    if (action.kind === 'forward_then_cut') {
      request.socket.destroy()
      return
    }
    response.writeHead(upstream.status, {'content-type': upstream.headers.get('content-type') ?? 'application/json'}).end(body)
  }
}
