// The least a Node.js hop can do (./paths.ts measures its CPU per request): a node:http server that
// streams each request to a Unix socket and the answer back, adding a request id, through undici's
// dispatcher (as the host does) or node:http's keep-alive Agent. Prints its port once it listens.
//
//   node --import tsx bench/host/node-proxy.ts <undici|http> <upstream socket>
import {randomUUID} from 'node:crypto'
import http from 'node:http'
import {Agent, type Dispatcher} from 'undici'

const [mode, socketPath] = process.argv.slice(2)
if ((mode !== 'undici' && mode !== 'http') || !socketPath) throw new Error('usage: node-proxy.ts <undici|http> <upstream socket>')
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'proxy-connection'])
const pool = new Agent({connections: 64, connect: {socketPath}})
const agent = new http.Agent({keepAlive: true, maxSockets: 64})

function viaUndici(request: http.IncomingMessage, response: http.ServerResponse, requestId: string): void {
  // Hop-by-hop headers are the proxy's own (undici refuses them).
  const headers: string[] = []
  const raw = request.rawHeaders
  for (let index = 0; index < raw.length; index += 2) if (!HOP_BY_HOP.has(raw[index]!.toLowerCase())) headers.push(raw[index]!, raw[index + 1]!)
  headers.push('x-request-id', requestId)
  pool.dispatch(
    {
      origin: 'http://shard',
      path: request.url ?? '/',
      method: request.method as Dispatcher.HttpMethod,
      headers,
      body: request.method === 'GET' ? undefined : request,
    },
    {
      onRequestStart(controller) {
        response.once('close', () => response.writableFinished || controller.abort(new Error('the client went away')))
      },
      onResponseStart(_controller, statusCode, upstreamHeaders) {
        response.writeHead(statusCode, {...upstreamHeaders, 'x-request-id': requestId} as http.OutgoingHttpHeaders)
      },
      onResponseData(controller, chunk) {
        if (!response.write(chunk)) {
          controller.pause()
          response.once('drain', () => controller.resume())
        }
      },
      onResponseEnd() {
        response.end()
      },
      onResponseError() {
        response.destroy()
      },
    },
  )
}

function viaHttp(request: http.IncomingMessage, response: http.ServerResponse, requestId: string): void {
  const upstream = http.request(
    {socketPath, agent, path: request.url, method: request.method, headers: {...request.headers, 'x-request-id': requestId}},
    (answer) => {
      response.writeHead(answer.statusCode ?? 502, {...answer.headers, 'x-request-id': requestId})
      answer.pipe(response)
    },
  )
  upstream.once('error', () => response.destroy())
  request.pipe(upstream)
}

const forward = mode === 'undici' ? viaUndici : viaHttp
const server = http.createServer((request, response) => {
  response.on('error', () => {})
  forward(request, response, randomUUID())
})
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as {port: number}).port}\n`))
process.once('SIGTERM', () => process.exit(0))
