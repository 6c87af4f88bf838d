// The least a Node.js hop can do (./paths.ts measures its CPU per request): a node:http server that
// streams each request to a Unix socket and the answer back, adding a request id, through undici's
// dispatcher (as the host does) or node:http's keep-alive Agent. Prints its port once it listens.
//
//   node --import tsx bench/host/node-proxy.ts <undici|http> <upstream socket>
import {randomUUID} from 'node:crypto'
import http from 'node:http'
import {Pool, type Dispatcher} from 'undici'

const [mode, socketPath] = process.argv.slice(2)
if ((mode !== 'undici' && mode !== 'http') || !socketPath) throw new Error('usage: node-proxy.ts <undici|http> <upstream socket>')
const pool = new Pool('http://shard', {connections: 64, socketPath})
const agent = new http.Agent({keepAlive: true, maxSockets: 64})

function viaUndici(request: http.IncomingMessage, response: http.ServerResponse, requestId: string): void {
  const headers = [...request.rawHeaders, 'x-request-id', requestId]
  pool.dispatch(
    {path: request.url ?? '/', method: request.method as Dispatcher.HttpMethod, headers, body: request.method === 'GET' ? undefined : request},
    {
      onResponseStart(_controller, statusCode, upstreamHeaders) {
        response.writeHead(statusCode, {...upstreamHeaders, 'x-request-id': requestId} as http.OutgoingHttpHeaders)
      },
      onResponseData(_controller, chunk) {
        response.write(chunk)
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
const server = http.createServer((request, response) => forward(request, response, randomUUID()))
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as {port: number}).port}\n`))
process.once('SIGTERM', () => process.exit(0))
