// How the kit's hosts read in text (`host list`, `host status`, `status`): one line each.
import type {HostView} from '../engine/hosts/manage.js'

export function hostLine(host: HostView): string {
  const since = (at: number | null) => (at === null ? '' : ` since ${new Date(at).toISOString()}`)
  const health =
    host.health === 'unreachable' ? `unreachable${since(host.unreachableSince)}` : host.health === 'behind' ? `behind${since(host.behindSince)}` : host.health
  const live = host.live ? (host.live.reachable ? ', answers now' : `, does not answer now (${host.live.error})`) : ''
  const shown = host.owns.slice(0, 3).join(', ') + (host.owns.length > 3 ? ', …' : '')
  const owns = host.owns.length > 0 ? `, owns ${host.owns.length} (${shown})` : ''
  return `${host.host}  ${host.state.padEnd(8)}  ${health}, lag ${host.lag}${owns}${live}  ${host.url}${host.publicUrl ? ` → ${host.publicUrl}` : ''}`
}
