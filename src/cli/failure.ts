// How a failed command reports itself: one line on stderr, and under --json also one JSON object on
// stdout, `{"error": {"code", "message", "exitCode"}}`, so a script reading stdout learns why.
import * as Errors from '@oclif/core/errors'
import {didYouMean} from '../did-you-mean.js'
import {KitError, type KitErrorCode} from '../errors.js'
import {ExitCode, exitCodeFor} from './exit-codes.js'

export interface Failure {
  code: KitErrorCode
  /** A narrower reference code (e.g. `edge_workers_maintenance`), when the error has one. */
  reason?: string
  message: string
  exitCode: number
}

/** The failure an error thrown by a command stands for; `flagNames` are the command's flags, for suggestions. */
export function failureOf(error: Error & {oclif?: {exit?: number}}, flagNames: readonly string[]): Failure {
  if (error instanceof KitError) {
    return {code: error.code, ...(error.reason ? {reason: error.reason} : {}), message: error.message, exitCode: exitCodeFor[error.code]}
  }
  // oclif's own parse errors (unknown flag, missing arg, bad option) are usage errors.
  if (error instanceof Errors.CLIError && (error.oclif?.exit === 2 || error.name.endsWith('Error'))) {
    const exitCode = error.oclif?.exit === undefined || error.oclif.exit === 2 ? ExitCode.usage : error.oclif.exit
    return {code: exitCode === ExitCode.usage ? 'usage' : 'internal', message: oneLine(error.message) + flagHint(error, flagNames), exitCode}
  }
  return {code: 'internal', message: error.message, exitCode: ExitCode.internal}
}

/** `; did you mean --department?` for an unknown flag close to a real one. */
function flagHint(error: Error, flagNames: readonly string[]): string {
  if (!(error instanceof Errors.CLIError) || !('flags' in error) || !Array.isArray(error.flags)) return ''
  const typed = String(error.flags[0] ?? '')
  const name = typed.replace(/^--?/, '').replace(/=.*$/, '')
  const suggestion = didYouMean(name, flagNames)
  return suggestion ? `; did you mean --${suggestion}?` : ''
}

/** oclif spreads a flag error over lines (`Parsing --x`, the reason, a help hint): keep what says why, on one line. */
function oneLine(message: string): string {
  const lines = message
    .split('\n')
    .map((line) => line.trim().replace(/:$/, ''))
    .filter((line) => line && !line.startsWith('See more help') && !/^The following errors? occurred$/.test(line))
  return lines.join(': ')
}
