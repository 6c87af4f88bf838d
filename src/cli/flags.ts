// Flag types shared by several commands.
import * as Errors from '@oclif/core/errors'
import * as Flags from '@oclif/core/flags'

const UNIT_SECONDS = {s: 1, m: 60, h: 3_600, d: 86_400} as const

/**
 * A duration in whole seconds, written as operators write them: `90` (seconds), `90s`, `10m`, `1h`,
 * `1h30m`, `2d`. Anything else is a usage error that shows the accepted forms.
 */
export function parseDurationSeconds(input: string): number {
  const text = input.trim().toLowerCase()
  if (/^\d+$/.test(text)) return Number(text)
  const parts = [...text.matchAll(/(\d+)([smhd])/g)]
  if (parts.length === 0 || parts.map((part) => part[0]).join('') !== text) {
    throw new Error(`"${input}" is not a duration: write 90, 90s, 10m, 1h or 1h30m`)
  }
  return parts.reduce((sum, [, amount, unit]) => sum + Number(amount) * UNIT_SECONDS[unit as keyof typeof UNIT_SECONDS], 0)
}

/** A duration flag (seconds); `min`/`max` bound it in seconds. */
export const durationFlag = Flags.custom<number, {min?: number; max?: number}>({
  helpValue: '<duration>',
  async parse(input, _context, options) {
    // A CLIError with exit 2, so the base command reports it as a one-line usage error.
    const usage = (message: string) => new Errors.CLIError(message, {exit: 2})
    let seconds: number
    try {
      seconds = parseDurationSeconds(input)
    } catch (error) {
      throw usage((error as Error).message)
    }
    if (options.min !== undefined && seconds < options.min) throw usage(`${input} is shorter than ${options.min} s`)
    if (options.max !== undefined && seconds > options.max) throw usage(`${input} is longer than ${options.max} s`)
    return seconds
  },
})
