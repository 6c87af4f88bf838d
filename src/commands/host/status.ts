import {BaseCommand} from '../../cli/base-command.js'
import {ExitCode} from '../../cli/exit-codes.js'
import {hostLine} from '../../cli/hosts-render.js'
import {hostStatus} from '../../engine/host-status.js'

export default class HostStatus extends BaseCommand<typeof HostStatus> {
  static override description = `Show the pairing with the edge host, whether it answers, its fence, script counts and quarantined Workers;
for a kit of several hosts, every host with its health and lag (docs/many-hosts.md).

Exit codes: 0 paired and reachable, 6 not paired (or the host answers that it does not know this kit's
pairing), 10 paired but unreachable.`
  static override examples = ['<%= config.bin %> host status', '<%= config.bin %> host status --json']
  static override enableJsonFlag = true

  async run() {
    const status = await hostStatus(await this.engine())
    const exitCode = !status.paired ? ExitCode.refused : !status.reachable ? ExitCode.hostUnreachable : ExitCode.ok
    return this.respond(
      status,
      () => {
        if (!status.paired) return `not paired: ${status.problem}`
        const lines = [`scope        ${status.pairing?.scope}`, `host         ${status.pairing?.host_url}`, `fingerprint  ${status.pairing?.host_fingerprint}`]
        const hosts = status.hosts.length > 1 ? ['hosts', ...status.hosts.map((host) => `  ${hostLine(host)}`)] : []
        if (!status.reachable) return [...lines, `reachable    no (${status.error})`, ...hosts].join('\n')
        return [
          ...lines,
          'reachable    yes',
          `public url   ${status.publicUrl}`,
          `scripts      ${status.scripts?.active} active, ${status.scripts?.locked_down} locked down, ${status.scripts?.retired} retired`,
          `shards       ${status.shards?.map((shard) => `#${shard.index} ${shard.state} (${shard.scripts} scripts)`).join(', ') || 'none'}`,
          `fence        ${status.fence ? `${status.fence.fenceId} until ${new Date(status.fence.expiresAt).toISOString()}` : 'none'}`,
          `quarantined  ${status.quarantined?.map((entry) => `${entry.script} (${entry.incidents} incidents, last ${entry.lastIncident}; 503 until its next deploy)`).join(', ') || 'none'}`,
          ...hosts,
        ].join('\n')
      },
      exitCode,
    )
  }
}
