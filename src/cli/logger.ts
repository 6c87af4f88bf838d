// Log lines for people and for machines: JSON lines for journald, cron mail and log shippers; one
// coloured human line per event when a person reads a terminal. Commands log on stderr (stdout
// stays for their own output); `host serve` logs on stdout.
import pino, {type Logger} from 'pino'
import type {Settings} from '../config/schema.js'
import {redactingLogOptions} from '../util/log-redaction.js'

export type LogFormat = 'human' | 'json'

/** Of a line's fields, the handles an operator acts on; the message itself says what happened. */
const HANDLES = ['outboxId', 'script', 'fenceId'] as const

/** `auto` means human when the log's stream is a terminal. */
export function resolveLogFormat(format: Settings['log_format'], fd: 1 | 2 = 2): LogFormat {
  if (format !== 'auto') return format
  return (fd === 1 ? process.stdout : process.stderr).isTTY ? 'human' : 'json'
}

export async function createLogger(options: {level: Settings['log_level']; format: LogFormat; fd: 1 | 2; base?: Record<string, unknown>}): Promise<Logger> {
  const {level, format, fd} = options
  if (format === 'json') {
    return pino(
      {level, base: {pid: process.pid, ...options.base}, timestamp: pino.stdTimeFunctions.isoTime, ...redactingLogOptions()},
      pino.destination({fd, sync: true}),
    )
  }
  // Loaded only for a person at a terminal: cron passes and services log JSON.
  const {default: pretty} = await import('pino-pretty')
  const stream = pretty({
    destination: fd,
    sync: true,
    colorize: Boolean((fd === 1 ? process.stdout : process.stderr).isTTY) && !process.env.NO_COLOR,
    translateTime: 'SYS:HH:MM:ss',
    hideObject: true,
    messageFormat: (log, messageKey) => {
      const handles = HANDLES.filter((key) => log[key] !== undefined).map((key) => `${key}=${String(log[key])}`)
      return handles.length > 0 ? `${String(log[messageKey])} (${handles.join(' ')})` : String(log[messageKey])
    },
  })
  return pino({level, base: undefined, timestamp: pino.stdTimeFunctions.epochTime, ...redactingLogOptions()}, stream)
}
