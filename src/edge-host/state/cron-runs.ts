// Cron triggers as the scheduler (../triggers/cron-scheduler.ts) reads them: each active script's
// triggers, and the occurrence each trigger last ran for.
import type {HostDatabase} from './database.js'

export interface CronTrigger {
  script: string
  shard: number
  cron: string
  /** The occurrence (ms since the epoch) this trigger last ran for; null before its first look. */
  lastScheduledAt: number | null
}

export class CronRuns {
  constructor(private readonly db: HostDatabase) {}

  /** The triggers of every script that serves: not retired, not locked down. */
  triggers(): CronTrigger[] {
    const scripts = this.db.all<{name: string; shard: number; crons: string}>(
      `SELECT name, shard, crons FROM scripts WHERE retired_at IS NULL AND locked_down_at IS NULL AND shard IS NOT NULL AND crons != '[]'`,
    )
    const runs = new Map(
      this.db
        .all<{script: string; cron: string; scheduled_at: number}>('SELECT script, cron, scheduled_at FROM cron_runs')
        .map((row) => [`${row.script} ${row.cron}`, row.scheduled_at]),
    )
    return scripts.flatMap((script) =>
      (JSON.parse(script.crons) as string[]).map((cron) => ({
        script: script.name,
        shard: script.shard,
        cron,
        lastScheduledAt: runs.get(`${script.name} ${cron}`) ?? null,
      })),
    )
  }

  record(script: string, cron: string, scheduledAt: number): void {
    this.db.write((tx) => tx.upsert('cron_runs', ['script', 'cron'], {script, cron, scheduled_at: scheduledAt}))
  }
}
