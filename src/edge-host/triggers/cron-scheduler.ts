// Runs scripts' cron triggers (UTC, Cloudflare's syntax: ../../protocol/api/crons.ts) through their
// shard's cron Worker (../../workerd/cron-config.ts). Every second — and whenever asked (tick) — each trigger
// whose next occurrence after the one it last ran for has come runs once, with the latest
// occurrence that has come as its scheduledTime. That one rule covers every miss: occurrences that
// passed while the host was down, while a fence held (no trigger runs during a fence, so a backup
// sees no cron writes), or while the script's shard was restarting run once when the host can run
// them again, never as a burst. A trigger is recorded as run before its invocation starts: a
// crash mid-invocation does not run it again; how each run ended is recorded once it answered. A
// trigger seen for the first time (a new deploy, a changed expression) starts from now: nothing
// before it existed runs.
import type {Logger} from 'pino'
import {lastCronTime, nextCronTime} from '../../protocol/management-api.js'
import type {Shard} from '../runtime/shard.js'
import type {HostState} from '../state/host-state.js'
import type {CronTrigger} from '../state/cron-runs.js'
import {CRON_SOCKET} from '../../workerd/cron-config.js'

const TICK_MS = 1000
/** Ticks run this long after a whole second of the clock: a timer may fire a little early, and a tick before the second would wait a whole one. */
const TICK_MARGIN_MS = 2

export interface CronSchedulerOptions {
  state: HostState
  shard: (index: number) => Shard | undefined
  /** The clock triggers follow (ms since the epoch). */
  now: () => number
  /** How long an invocation waits for a shard that is restarting. */
  holdTimeoutMs: number
  log: Logger
}

export class CronScheduler {
  private timer: NodeJS.Timeout | null = null
  private stopped = false
  /** Ticks run one after another, each reading the clock when it starts. */
  private ticks: Promise<void> = Promise.resolve()

  constructor(private readonly options: CronSchedulerOptions) {}

  start(): void {
    // Each tick is timed to a whole second of the clock, where every cron occurrence falls: a
    // trigger runs milliseconds after its minute starts, not anywhere up to a second later.
    if (this.stopped) return
    this.timer = setTimeout(
      () => {
        this.start()
        void this.tick()
      },
      TICK_MS - (this.options.now() % TICK_MS) + TICK_MARGIN_MS,
    )
    this.timer.unref()
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    await this.ticks
  }

  /** Runs the triggers that are due now; resolves when their invocations have answered. */
  tick(): Promise<void> {
    this.ticks = this.ticks.then(() => this.runDue()).catch((error: unknown) => this.options.log.error({err: error}, 'cron triggers failed'))
    return this.ticks
  }

  private async runDue(): Promise<void> {
    const {state} = this.options
    if (state.fences.active() !== null) return
    const now = this.options.now()
    const invocations: Array<Promise<void>> = []
    for (const trigger of state.cronRuns.triggers()) {
      const latest = lastCronTime(trigger.cron, now)
      if (trigger.lastScheduledAt === null) {
        state.cronRuns.record(trigger.script, trigger.cron, latest ?? now)
        continue
      }
      const due = nextCronTime(trigger.cron, trigger.lastScheduledAt)
      if (due === null || due > now || latest === null) continue
      const shard = this.options.shard(trigger.shard)
      if (shard?.routeOf(trigger.script) === undefined) continue
      state.cronRuns.record(trigger.script, trigger.cron, latest)
      invocations.push(this.invoke(shard, trigger, latest))
    }
    await Promise.all(invocations)
  }

  private async invoke(shard: Shard, trigger: CronTrigger, scheduledTime: number): Promise<void> {
    const {log, state} = this.options
    const at = new Date(scheduledTime).toISOString()
    const outcome = await this.run(shard, trigger, scheduledTime)
    state.cronRuns.recordOutcome(trigger.script, trigger.cron, scheduledTime, outcome)
    if (outcome === 'ok') log.info({script: trigger.script, cron: trigger.cron, scheduledTime: at}, 'cron trigger ran')
    else log.warn({script: trigger.script, cron: trigger.cron, scheduledTime: at, outcome}, 'cron trigger failed')
  }

  /** workerd's outcome of the scheduled() invocation, or why it could not be made. */
  private async run(shard: Shard, trigger: CronTrigger, scheduledTime: number): Promise<string> {
    const lease = await shard.acquire(this.options.holdTimeoutMs, trigger.script)
    if (!lease) return 'skipped: its shard does not serve'
    let failed = false
    try {
      const response = await lease.dispatcher.request({
        origin: `http://${CRON_SOCKET}`,
        path: '/',
        method: 'POST',
        headers: {'content-type': 'application/json'},
        body: JSON.stringify({script: trigger.script, cron: trigger.cron, scheduledTime}),
      })
      const answer = (await response.body.json().catch(() => null)) as {outcome?: string} | null
      return response.statusCode === 200 ? (answer?.outcome ?? 'unknown') : `status ${response.statusCode}`
    } catch (error) {
      failed = true
      return `unreachable: ${(error as Error).message}`
    } finally {
      lease.release(failed)
    }
  }
}
