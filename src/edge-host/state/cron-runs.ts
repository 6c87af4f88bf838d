// Cron triggers as the scheduler (../triggers/cron-scheduler.ts) reads them: each active script's
// triggers, and the occurrence each trigger last ran for; and as operators read them (`edgeworkers
// triggers list`): with how the last finished run ended and when the next one comes.
import {type CronTriggerStatus, nextCronTime} from '../../protocol/management-api.js'
import {HANDED_OVER} from './handovers.js'
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
      `SELECT s.name, s.shard, s.crons FROM scripts s LEFT JOIN script_handovers h ON h.script = s.name
       WHERE s.retired_at IS NULL AND s.locked_down_at IS NULL AND s.shard IS NOT NULL AND s.crons != '[]' AND NOT ${HANDED_OVER}`,
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

  /** How the run for occurrence `scheduledAt` ended (after record() marked it as run). */
  recordOutcome(script: string, cron: string, scheduledAt: number, outcome: string): void {
    this.db.write((tx) =>
      tx.run('UPDATE cron_runs SET outcome = ?, outcome_scheduled_at = ? WHERE script = ? AND cron = ?', outcome, scheduledAt, script, cron),
    )
  }

  /** The triggers of `script`'s release with their last finished run and, while it serves, the next one after `now`. */
  status(script: string, now: number): CronTriggerStatus[] {
    const row = this.db.one<{crons: string; serves: number}>(
      'SELECT crons, retired_at IS NULL AND locked_down_at IS NULL AND shard IS NOT NULL AS serves FROM scripts WHERE name = ?',
      script,
    )
    if (!row) return []
    const runs = new Map(
      this.db
        .all<{cron: string; outcome: string | null; outcome_scheduled_at: number | null}>(
          'SELECT cron, outcome, outcome_scheduled_at FROM cron_runs WHERE script = ?',
          script,
        )
        .map((run) => [run.cron, run]),
    )
    return (JSON.parse(row.crons) as string[]).map((cron) => {
      const run = runs.get(cron)
      return {
        cron,
        lastRunAt: run?.outcome_scheduled_at ?? null,
        lastOutcome: run?.outcome ?? null,
        nextRunAt: row.serves ? nextCronTime(cron, now) : null,
      }
    })
  }
}
