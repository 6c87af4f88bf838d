// The HAProxy configuration of the host's front door (host.front = "haproxy", ./front.ts): it owns the
// public listener, answers nothing itself, and sends each request either straight to the Worker's
// own workerd socket (the fast path: the script's name is in the fast map) or to the Node data plane
// on its internal socket (everything else, unchanged). The fast path does what the Node data plane
// does to such a request (../http/worker-forwarding.ts): the request id (a valid inbound UUID or a
// new one) both ways, Host `<script>.<base domain>`, the path without its `/<script>` prefix,
// x-forwarded-for the client's address, and the host's own headers never forwarded.
import {SIGNATURE_HEADERS} from '../../protocol/signing.js'
import {SERVICE_CALLER_HEADER, SERVICE_TARGET_HEADER} from '../../workerd/config.js'
import {LOAD_HEADER, WARM_HEADER} from '../../workerd/loader-worker.js'

/** The client's address as HAProxy saw it, for the Node data plane behind it (it sees only HAProxy). */
export const CLIENT_ADDRESS_HEADER = 'x-edgeworkers-client-address'

/** Headers a client sends that never reach a Worker (as NOT_FORWARDED in ../http/worker-forwarding.ts; HAProxy handles the hop-by-hop ones). */
const HOST_HEADERS: readonly string[] = [
  'proxy-connection',
  'keep-alive',
  'te',
  'trailer',
  'x-forwarded-for',
  SERVICE_TARGET_HEADER,
  SERVICE_CALLER_HEADER,
  LOAD_HEADER,
  WARM_HEADER,
  ...SIGNATURE_HEADERS,
]

export interface FrontConfig {
  /** `fd@3` (the socket the host bound) or `HOST:PORT` (a restart, on the port the first start got). */
  bind: string
  baseDomain: string
  /** HAProxy's runtime API (admin level), a Unix socket. */
  adminSocket: string
  /** The Node data plane's internal socket. */
  nodeSocket: string
  /** script → fast backend; its file path names it in the runtime API. */
  mapFile: string
  /** Fast backends `w<i>`, each serving from the symlink `<slotDir>/<i>`, pointed at a Worker's socket (retrying on the Node data plane). */
  slots: number
  slotDir: string
  maxConnections: number
  /** host.max_connections_per_address (0: none). */
  maxConnectionsPerAddress: number
  headerTimeoutMs: number
  /** host.request_timeout_ms: how long a connection may hold a request whose body never ends. */
  requestTimeoutMs: number
  idleTimeoutMs: number
}

/** One rule for all of them: HAProxy walks the headers once per rule. */
const HOST_HEADERS_PATTERN = `^(${HOST_HEADERS.join('|')})$`

/** A fast backend's server for the Worker's own socket (the slot's symlink). */
export const SLOT_SERVER = 'w'
/** A fast backend's server for its retries: the Node data plane. */
export const RETRY_SERVER = 'node'

/** The name of fast backend `index`. */
export function slotBackend(index: number): string {
  return `w${index}`
}

export function renderFrontConfig(config: FrontConfig): string {
  const base = config.baseDomain.toLowerCase()
  const escapedBase = base.replace(/[.]/g, '\\.')
  const uuid = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
  const perAddress =
    config.maxConnectionsPerAddress > 0
      ? [
          '  stick-table type ipv6 size 1m store conn_cur',
          '  tcp-request connection track-sc0 src',
          `  tcp-request connection reject if { sc0_conn_cur gt ${config.maxConnectionsPerAddress} }`,
        ]
      : []
  const slots: string[] = []
  for (let index = 0; index < config.slots; index++) {
    slots.push(
      `backend ${slotBackend(index)}`,
      // As the Node data plane does: a request without a body of an idempotent method goes again when its process
      // died under it, but never the request of a Worker blamed for a runaway (its slot is taken out of service).
      // It goes again to the Node data plane, which holds it for the shard's next process: "first" sends every
      // request to the Worker's own socket, and a redispatch, on each retry, to the server that did not fail.
      // (HAProxy retries a refused Unix-socket connection at once, long before the host sees the process die.)
      '  balance first',
      '  option redispatch 1',
      '  retries 3',
      '  retry-on conn-failure empty-response',
      '  http-request disable-l7-retry unless { method GET HEAD OPTIONS }',
      '  http-request disable-l7-retry if { req.hdr_cnt(transfer-encoding) gt 0 } or { req.hdr_val(content-length) gt 0 }',
      `  http-response del-header ^(host|${HOST_HEADERS.join('|')})$ -m reg`,
      '  http-response set-header x-request-id %[var(txn.request_id)]',
      `  server ${SLOT_SERVER} ${config.slotDir}/${index}`,
      `  server ${RETRY_SERVER} ${config.nodeSocket}`,
    )
  }
  return [
    'global',
    '  nbthread 1',
    `  maxconn ${config.maxConnections}`,
    `  stats socket ${config.adminSocket} mode 600 level admin`,
    'defaults',
    '  mode http',
    '  timeout connect 5s',
    `  timeout client ${config.idleTimeoutMs}ms`,
    `  timeout http-request ${config.headerTimeoutMs}ms`,
    `  timeout http-keep-alive ${config.idleTimeoutMs}ms`,
    // The Node data plane and workerd bound their own request times; a stream may be long.
    '  timeout server 24h',
    // An answer complete before its request (a body that never ends) leaves HAProxy a tunnel: it goes after the
    // request timeout, as on the Node listener. A WebSocket's tunnel is long (backend node_upgrade).
    `  timeout tunnel ${config.requestTimeoutMs}ms`,
    // When no Worker answer comes, the Node data plane's answer (../http/data-plane.ts), not HAProxy's HTML page.
    ...[502, 503, 504].map(
      (status) =>
        `  http-error status ${status} content-type application/json lf-string '{"code":"worker_unavailable","message":"Worker unavailable"}' hdr cache-control no-store hdr x-request-id %[var(txn.request_id)]`,
    ),
    'frontend public',
    `  bind ${config.bind}`,
    `  maxconn ${config.maxConnections}`,
    ...perAddress,
    // The request id: the client's when it sent exactly one that is a UUID, else a new one.
    `  http-request set-var(txn.request_id) req.fhdr(x-request-id) if { req.fhdr_cnt(x-request-id) eq 1 } { req.fhdr(x-request-id) -m reg ${uuid} }`,
    '  http-request set-var(txn.request_id) uuid() unless { var(txn.request_id) -m found }',
    '  http-request set-header x-request-id %[var(txn.request_id)]',
    `  http-request del-header ${CLIENT_ADDRESS_HEADER}`,
    // The script: by host name (<script>.<base domain>) or by the path's first segment.
    "  http-request set-var(txn.host) req.hdr(host),lower,regsub(':[0-9]+$','')",
    `  acl by_host var(txn.host) -m end .${base}`,
    `  http-request set-var(txn.script) var(txn.host),regsub('\\.${escapedBase}$','') if by_host`,
    '  http-request set-var(txn.script) path,field(2,/) if !by_host !{ path /livez /readyz }',
    // Upgrades (WebSockets) stay on the Node data plane: it closes them when their process is replaced.
    `  http-request set-var(txn.slot) var(txn.script),map(${config.mapFile}) if { var(txn.script) -m found } !{ req.fhdr_cnt(upgrade) gt 0 }`,
    '  acl fast var(txn.slot) -m found',
    "  http-request set-var(txn.rest) path,regsub('^/[^/]*','') if fast !by_host",
    '  http-request set-path / if fast !by_host { var(txn.rest) -m len 0 }',
    '  http-request set-path %[var(txn.rest)] if fast !by_host !{ var(txn.rest) -m len 0 }',
    `  http-request set-header host %[var(txn.script)].${base} if fast`,
    `  http-request del-header ${HOST_HEADERS_PATTERN} -m reg if fast`,
    '  http-request set-header x-forwarded-for %[src] if fast',
    `  http-request set-header ${CLIENT_ADDRESS_HEADER} %[src] unless fast`,
    '  use_backend %[var(txn.slot)] if fast',
    '  use_backend node_upgrade if { req.fhdr_cnt(upgrade) gt 0 }',
    '  default_backend node',
    'backend node',
    `  server node ${config.nodeSocket}`,
    'backend node_upgrade',
    '  timeout tunnel 24h',
    `  server node ${config.nodeSocket}`,
    ...slots,
    '',
  ].join('\n')
}
