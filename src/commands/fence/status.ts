import {BaseCommand} from '../../cli/base-command.js'
import {fenceFields, timeLeft} from '../../cli/fence-render.js'
import {table} from '../../cli/table.js'
import {fenceStatus} from '../../engine/fence/lifecycle.js'

export default class FenceStatus extends BaseCommand<typeof FenceStatus> {
  static override description = `Show the backup fence as the store and the host see it, the gates, and recent fences.

"overdue" means the store shows a fence open past its expiry: the host has lifted it by itself; a
reconcile pass (or \`fence end\`) records that. Exit code 0 whatever the state; 6 when unpaired.`
  static override examples = ['<%= config.bin %> fence status', '<%= config.bin %> fence status --json']
  static override enableJsonFlag = true
  static override flags = {}

  async run() {
    const status = await fenceStatus(await this.engine())
    return this.respond(status, () => {
      const host = status.host.reachable
        ? status.host.active
          ? `fenced by ${status.host.active.fenceId} (${status.host.active.secondsLeft}s left)`
          : 'not fenced'
        : `unreachable: ${status.host.error}`
      const gates = [
        status.gates.maintenance ? `maintenance on (${status.gates.reasons.maintenance})` : 'maintenance off',
        status.gates.restore_pending ? `restore pending (${status.gates.reasons.restore_pending})` : 'no restore pending',
      ]
      return [
        `scope    ${status.scope}`,
        `store    ${status.open ? `fence ${status.open.id} ${status.open.state}${status.overdue ? ' — OVERDUE, run `edgeworkers reconcile`' : ''}` : 'no open fence'}`,
        `host     ${host}`,
        `gates    ${gates.join(', ')}`,
        ...(status.open ? ['', fenceFields(status.open)] : []),
        '',
        table(
          ['FENCE', 'STATE', 'BEGAN', 'EXPIRES/ENDED', 'REASON'],
          status.recent.map((fence) => [
            fence.id,
            fence.endReason ? `${fence.state} (${fence.endReason})` : fence.state,
            fence.beganAt,
            fence.endedAt ?? `${fence.expiresAt} (${timeLeft(fence.expiresAt)})`,
            fence.reason,
          ]),
          'no fences yet',
        ),
      ].join('\n')
    })
  }
}
