// `edgeworkers lb config --haproxy` (docs/many-hosts.md): an HAProxy configuration with every active
// host of the kit as a backend server, health-checked on the data plane's /readyz (so a host that
// restarted with stale code, or was drained, gets no traffic until the kit confirms it), idempotent
// requests retried on another host when one dies under them, and WebSocket upgrades passed through.
// A stateful Worker is served by its owner host alone (./placement.ts): its path `/<script>/` and
// host name `<script>.<base domain>` go to a backend with that one host.
import {KitError} from '../../errors.js'
import type {Engine} from '../context.js'
import {listKitHosts, type HostView} from './manage.js'
import {kitProvider} from './members.js'

export interface LoadBalancerOptions {
  /** Where HAProxy listens, HOST:PORT. */
  bind: string
  /** How often HAProxy checks each host's /readyz; it marks a host down after 2 failures and up after 2 successes. */
  checkIntervalMs: number
}

type Server = {name: string; host: string; address: string}

export interface LoadBalancerConfig {
  kit: string
  servers: Server[]
  /** Stateful Workers routed to their owner host's server alone. */
  owned: Array<{scriptName: string; server: string}>
  /** Active hosts left out because their data-plane address is unknown (never reached). */
  skipped: string[]
  text: string
}

export async function haproxyConfig(engine: Engine, options: LoadBalancerOptions): Promise<LoadBalancerConfig> {
  const {kit, hosts} = await listKitHosts(engine, {live: 'always', timeoutMs: engine.settings.provider.connect_timeout_ms})
  const servers: LoadBalancerConfig['servers'] = []
  const skipped: string[] = []
  for (const host of hosts.filter((candidate) => candidate.state === 'active')) {
    const address = addressOf(host)
    if (address) servers.push({name: serverName(host.host), host: host.host, address})
    else skipped.push(host.host)
  }
  if (servers.length === 0) throw new KitError('not_found', `kit ${kit} has no active host with a known data-plane address; run \`edgeworkers host status\``)
  const {owned, ownerServers, baseDomain} = await ownedRoutes(engine, kit, hosts)
  return {kit, servers, owned, skipped, text: render(kit, servers, {owned, ownerServers, baseDomain}, options)}
}

interface OwnedRoutes {
  owned: LoadBalancerConfig['owned']
  /** The owner hosts' servers, each in a backend of its own (a draining owner too: its /readyz says 503, so move its Workers first). */
  ownerServers: Server[]
  baseDomain: string
}

/** The kit's serving stateful Workers with the server of their owner (one with a known address). */
async function ownedRoutes(engine: Engine, kit: string, hosts: HostView[]): Promise<OwnedRoutes> {
  const serving = new Set((await engine.store.hosts.currentReleases(kit)).map((release) => release.script_name))
  const owners = (await engine.store.owners.list(kit)).filter((row) => serving.has(row.script_name))
  const ownerServers: Server[] = []
  const owned: OwnedRoutes['owned'] = []
  for (const row of owners) {
    const host = hosts.find((candidate) => candidate.host === row.host_scope)
    const address = host && addressOf(host)
    if (!address) continue
    const server = {name: serverName(row.host_scope), host: row.host_scope, address}
    if (!ownerServers.some((known) => known.name === server.name)) ownerServers.push(server)
    owned.push({scriptName: row.script_name, server: server.name})
  }
  if (owned.length === 0) return {owned, ownerServers, baseDomain: ''}
  // Every host of a kit serves the same base domain (host.base_domain): the first that answers says which.
  const baseDomain = await kitProvider(engine.store, engine.settings, engine.hosts, kit).then((provider) => provider?.describeHost())
  if (!baseDomain) throw new KitError('not_found', `kit ${kit} has no host left`)
  return {owned, ownerServers, baseDomain: baseDomain.baseDomain}
}

const serverName = (hostScope: string) => hostScope.replace(/^onprem:/, 'h-')

function addressOf(host: HostView): string | null {
  if (!host.publicUrl) return null
  const url = new URL(host.publicUrl)
  return `${url.hostname}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`
}

function render(
  kit: string,
  servers: Server[],
  routes: Omit<OwnedRoutes, 'owned'> & {owned: LoadBalancerConfig['owned']},
  options: LoadBalancerOptions,
): string {
  const inter = `${options.checkIntervalMs}ms`
  const health = `    option httpchk GET /readyz
    http-check expect status 200
    default-server check inter ${inter} fastinter ${inter} downinter ${inter} fall 2 rise 2`
  // A Worker by path or by host name (the Host header without its port).
  const ownedRules = routes.owned.flatMap(({scriptName, server}) => [
    `    acl owned_${scriptName} path /${scriptName} or path_beg /${scriptName}/`,
    `    acl owned_${scriptName} req.hdr(host),field(1,:) -m str ${scriptName}.${routes.baseDomain}`,
    `    use_backend owner_${server} if owned_${scriptName}`,
  ])
  const ownerBackends = routes.ownerServers.map(
    (server) => `
# The owner of stateful Workers: they run here alone (docs/many-hosts.md).
backend owner_${server.name}
${health}
    server ${server.name} ${server.address}
`,
  )
  return `# Generated by \`edgeworkers lb config --haproxy\` for kit ${kit}; regenerate after host pair/drain/remove.
# Every host of the kit should run with host.await_kit_confirmation = true (docs/many-hosts.md).
global
    # maxconn: derived from the file descriptor limit HAProxy starts with.

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # A busy host may take a while to answer /readyz: slow is not down (a dead one refuses at once).
    timeout check 2s
    # WebSocket: an upgraded connection may stay open and quiet this long.
    timeout tunnel 1h
    option http-keep-alive
    # A request that met a dead host is sent again, to another host (redispatch), up to 3 times...
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout 502 503 504

frontend edgeworkers
    bind ${options.bind}
    # ...but only an idempotent one: a request whose connection never opened is always safe to resend.
    acl idempotent method GET HEAD OPTIONS PUT DELETE
    http-request disable-l7-retry if !idempotent
${ownedRules.map((line) => `${line}\n`).join('')}    default_backend edgeworkers_hosts

backend edgeworkers_hosts
    balance roundrobin
${health}
${servers.map((server) => `    server ${server.name} ${server.address}`).join('\n')}
${ownerBackends.join('')}`
}
