// Cron triggers as Cloudflare reads them: five fields (minute, hour, day of month, month, day of
// week), in UTC, with the Quartz-like extensions Cloudflare supports — `L` and `W` in the day of
// month, `L` and `#` in the day of week, weekdays 1–7 from Sunday or SUN–SAT, months 1–12 or JAN–DEC.
// croner does the parsing and the arithmetic (one parser for the kit's validation and the host's
// schedule, so what deploys is what runs).
import {Cron} from 'croner'
import {z} from 'zod'

/** The most cron triggers one Worker may have. */
export const MAX_CRONS = 16

const parsed = new Map<string, Cron>()

function cronOf(expression: string): Cron {
  let cron = parsed.get(expression)
  if (!cron) {
    cron = new Cron(expression, {mode: '5-part', alternativeWeekdays: true, timezone: 'Etc/UTC', paused: true})
    parsed.set(expression, cron)
  }
  return cron
}

/** Why `expression` is not a cron trigger Cloudflare would run, or null when it is one. */
export function cronProblem(expression: string): string | null {
  const fields = expression.trim().split(/\s+/)
  if (fields.length !== 5) return 'it must have five fields: minute, hour, day of month, month, day of week'
  const weekday = weekdayOutOfRange(fields[4]!)
  if (weekday !== null) return `day of week ${weekday} is not 1–7 (1 = Sunday) or SUN–SAT`
  let cron: Cron
  try {
    cron = cronOf(expression)
  } catch (error) {
    return (error as Error).message.replace(/^CronPattern: /, '')
  }
  return cron.nextRun(new Date()) === null ? 'it never fires' : null
}

// croner's Quartz numbering shifts weekdays by one and then takes 7 for Sunday too, so it would
// read 8 as Sunday and report 0 as -1: the range is checked here, on the numbers as written.
function weekdayOutOfRange(field: string): string | null {
  for (const item of field.split(',')) {
    const [range = ''] = item.replace(/L$/i, '').split(/[#/]/)
    for (const bound of range.split('-')) if (/^\d+$/.test(bound) && (Number(bound) < 1 || Number(bound) > 7)) return bound
  }
  return null
}

/** The first time `expression` fires strictly after `after` (ms since the epoch), or null. */
export function nextCronTime(expression: string, after: number): number | null {
  return cronOf(expression).nextRun(new Date(after))?.getTime() ?? null
}

/** The last time `expression` fired at or before `at` (ms since the epoch), or null. */
export function lastCronTime(expression: string, at: number): number | null {
  return (
    cronOf(expression)
      .previousRuns(1, new Date(at + 1))[0]
      ?.getTime() ?? null
  )
}

export const cronExpressionSchema = z.string().superRefine((expression, context) => {
  const problem = cronProblem(expression)
  if (problem !== null) context.addIssue({code: 'custom', message: `${JSON.stringify(expression)} is not a cron expression Cloudflare runs: ${problem}`})
})

export const cronListSchema = z
  .array(cronExpressionSchema)
  .max(MAX_CRONS)
  .refine((crons) => new Set(crons).size === crons.length, {error: 'lists a cron expression twice'})

/** One cron trigger of a script as `edgeworkers triggers list` shows it (times in ms since the epoch, UTC). */
export const cronTriggerStatusSchema = z.strictObject({
  cron: z.string(),
  /** The occurrence the trigger last ran for; null before its first run. */
  lastRunAt: z.number().nullable(),
  /** How its last finished run ended: workerd's outcome (ok, exception, exceededCpu, …), or why it could not run; null before one finished. */
  lastOutcome: z.string().nullable(),
  /** The next occurrence on the host's clock; null while the script does not serve (retired, locked down) or never again. */
  nextRunAt: z.number().nullable(),
})
export type CronTriggerStatus = z.infer<typeof cronTriggerStatusSchema>

export const cronTriggerListSchema = z.strictObject({triggers: z.array(cronTriggerStatusSchema)})
export type CronTriggerList = z.infer<typeof cronTriggerListSchema>
