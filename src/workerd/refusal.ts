// Reading workerd's refusal of a script: its error output, reduced to the script's own problems.
import {CHECK_MODULE} from './config.js'

/**
 * The one line to report for a script workerd refused, from the sandbox's error output: the
 * script's own errors only (workerd adds warnings, such as "no such Durable Object class is
 * exported" after a syntax error, that mislead), each as `<module>:<line>: <error>` when workerd
 * says where. A flag that needs `--experimental` says how to allow it.
 */
export function refusalMessage(error: string, script: string): string {
  return refusalProblems(error, script).join('; ')
}

/** The problems refusalMessage joins, one per error workerd reported for the script. */
export function refusalProblems(error: string, script: string): string[] {
  const lines = error.split('\n')
  const prefix = `service ${script}: `
  const problems: string[] = []
  lines.forEach((line, index) => {
    if (!line.startsWith(prefix)) return
    const message = line.slice(prefix.length)
    // Printed for redundant flags even when the start succeeds: not a reason for a refusal.
    if (/became the default as of .* does not need to be specified/.test(message)) return
    const experimental = /^The compatibility flag (\S+) is experimental/.exec(message)
    if (experimental) {
      problems.push(
        `compatibility flag ${experimental[1]} needs workerd's experimental mode, which this host does not run; ` +
          'start it with --experimental (setting host.experimental = true) to allow it',
      )
      return
    }
    const where = /^\s+at (\S+)$/.exec(lines[index + 1] ?? '')?.[1]
    // The check module (./config.ts) throws its own errors; its position says nothing.
    if (where?.startsWith(CHECK_MODULE)) problems.push(message.replace(/^Uncaught Error: /, ''))
    else problems.push(where ? `${where}: ${message}` : message)
  })
  if (problems.length > 0) return problems
  return [lines.find((line) => line.trim() !== '' && !/: warning: /.test(line))?.trim() ?? error.trim()]
}
