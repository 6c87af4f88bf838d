import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../cli/base-command.js'
import {ExitCode} from '../cli/exit-codes.js'
import {statusText} from '../cli/status-text.js'
import {engineStatusSource} from '../engine/status/source.js'
import {takeSnapshot} from '../engine/status/snapshot.js'

export default class Status extends BaseCommand<typeof Status> {
  static override description = `What is stuck, why, and what to do about it: a live view of the kit, or one snapshot.

In a terminal, a live view refreshed every status.refresh_interval_ms (2 s): the kit scope and pairing; the edge host (reachable, ready, shards up, scripts live and retired); the backup fence and the maintenance and restore gates, with time left; per lane and status, counts and the age of the oldest due row; leased rows with owner and lease time left; failed and uncertain rows grouped by last error code; pending retirements and orphans; the latest audit rows.

Keys: tab and arrows move between panels and rows; enter drills into a row; r retries a row now, c cancels one, p runs one pass of a lane (each asks first); / filters; ? lists the keys; q quits.

Outside a terminal (a pipe, cron, CI), or with --json, it prints one snapshot and exits. Open rows are counted whole; finished ones (completed, cancelled) over status.finished_window_seconds (24 h).

Exit codes: 0 nothing needs attention; 13 something does — failed or uncertain rows, an edge host that is unreachable or not paired, a backup fence open past its TTL (the snapshot says which); 4 the store is unavailable (the live view says why instead, and keeps trying).`
  static override examples = [
    '<%= config.bin %> status',
    '<%= config.bin %> status --interval 5000',
    '<%= config.bin %> status --json',
    '<%= config.bin %> status > /dev/null || echo "edgeworkers needs attention"',
  ]
  static override enableJsonFlag = true
  static override flags = {
    interval: Flags.integer({
      min: 250,
      max: 600_000,
      description: 'Refresh the live view every N milliseconds (250–600000). Default: status.refresh_interval_ms (2000)',
    }),
  }

  protected override settingOverrides(): Record<string, unknown> {
    return {'status.refresh_interval_ms': this.flags.interval}
  }

  /** The live view restores the terminal on a signal (../tui/run.tsx) before the command ends. */
  private inLiveView = false

  protected override unwindsOnInterrupt(): boolean {
    return this.inLiveView
  }

  protected override interruptNote(): string {
    return 'nothing was left'
  }

  async run() {
    if (!this.jsonEnabled() && process.stdin.isTTY && process.stdout.isTTY && !runsInCi(process.env)) {
      // The engine logs nothing here: a log line would tear the screen; results show in the view.
      const source = engineStatusSource(() => this.engine({silent: true}), this.operator)
      // Ink and React load only for the live view: every other command, and a piped status, skip them.
      const {runStatusTui} = await import('../tui/run.js')
      this.inLiveView = true
      await runStatusTui(source, {intervalMs: this.settings.status.refresh_interval_ms})
      return undefined
    }
    const snapshot = await takeSnapshot(await this.engine())
    return this.respond(snapshot, () => statusText(snapshot), snapshot.attention.length > 0 ? ExitCode.attention : ExitCode.ok)
  }
}

/** Ink draws only the last frame under CI; a CI job gets the snapshot instead (same rule as Ink's is-in-ci). */
function runsInCi(env: NodeJS.ProcessEnv): boolean {
  if (env.CI === '0' || env.CI === 'false') return false
  return 'CI' in env || 'CONTINUOUS_INTEGRATION' in env || Object.keys(env).some((name) => name.startsWith('CI_'))
}
