import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {durationFlag} from '../../cli/flags.js'
import {ExitCode} from '../../cli/exit-codes.js'
import {republishLine} from '../../cli/fence-render.js'
import {FENCE_RUN_ENV} from '../../config/fence-environment.js'
import {runInFence, type FenceRunResult} from '../../engine/fence/run.js'
import {KitError} from '../../errors.js'

export default class FenceRun extends BaseCommand<typeof FenceRun> {
  static override description = `Run a backup command inside a backup fence, and always lift the fence afterwards.

The fence is lifted when the command exits — successfully or not — and when this process gets
SIGINT, SIGTERM or SIGHUP (forwarded to the command, which is waited for first). If this process is
killed outright, the host lifts the fence at its TTL and the next reconcile pass records it.
The command's environment carries ${Object.values(FENCE_RUN_ENV).join(', ')}.
Exit code: the command's (128+n when signal n ended it, 127 when it could not start); 10 when the
command succeeded but the lift failed; the fence begin's own codes (see fence begin) when it never ran.`
  static override examples = [
    '<%= config.bin %> fence run --ttl 1800 -- edgeworkers backup create /backups/$(date +%F)',
    '<%= config.bin %> fence run --reason "LVM snapshot" -- /usr/local/bin/snapshot-volumes',
  ]
  static override strict = false
  static override enableJsonFlag = true
  static override flags = {
    ttl: durationFlag({description: 'How long until the host lifts the fence by itself: 1800, 30m, 2h (default fence.default_ttl_seconds)'}),
    reason: Flags.string({default: 'backup', description: 'Why the host is fenced'}),
  }

  private result?: FenceRunResult

  /** The signal goes to the command (runInFence forwards it), which is waited for; the fence is lifted after. */
  protected override unwindsOnInterrupt(): boolean {
    return true
  }

  protected override interruptNote(): string {
    const result = this.result
    if (!result) return 'no fence was begun'
    const command = `the command ended${result.signal ? ` by ${result.signal}` : ` with ${result.exitCode}`}`
    return 'error' in result.end
      ? `${command}; fence ${result.fence.id} was NOT lifted (${result.end.error}): the host lifts it at ${result.fence.expiresAt}, or run \`edgeworkers fence end ${result.fence.id}\``
      : `${command} and fence ${result.fence.id} was lifted`
  }

  async run() {
    const command = this.positionals
    if (command.length === 0)
      throw new KitError('usage', 'fence run needs a command after --, e.g. `edgeworkers fence run -- edgeworkers backup create /backups/today`')
    const engine = await this.engine({interactive: true})
    const result = await runInFence(engine, {
      ttlSeconds: this.flags.ttl,
      reason: this.flags.reason,
      command,
      actor: this.operator,
      onBegun: (fence) => {
        if (!this.jsonEnabled()) this.logToStderr(`fence ${fence.id} begun (host lifts it by itself at ${fence.expiresAt}); running ${command[0]}`)
      },
    })
    this.result = result
    if (result.startError) this.logToStderr(`error: ${result.startError.split('\n')[0]}`)
    const lifted = !('error' in result.end)
    const exitCode = result.exitCode === 0 && !lifted ? ExitCode.hostUnreachable : result.exitCode
    return this.respond(
      result,
      () =>
        [
          `command exited ${result.exitCode}${result.signal ? ` (${result.signal})` : ''}${result.startError ? `: ${result.startError}` : ''}`,
          'error' in result.end ? `fence ${result.fence.id} NOT lifted: ${result.end.error}` : `fence ${result.fence.id} lifted`,
          ...('republish' in result.end && result.end.republish ? [republishLine(result.end.republish)] : []),
        ].join('\n'),
      exitCode,
    )
  }
}
