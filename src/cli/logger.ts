// Log lines for people and for machines: JSON lines for journald, cron mail and log shippers; one
// coloured human line per event when a person reads a terminal. Commands log on stderr (stdout
// stays for their own output); `host serve` logs on stdout.
import {fstatSync} from 'node:fs'
import pino, {type DestinationStream, type Level, type Logger} from 'pino'
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

/**
 * pino level → syslog priority. journald reads a `<N>` prefix on a line of a service's stdout or
 * stderr as the line's priority (and strips it), so `journalctl -p err` finds errors.
 */
const SYSLOG_PRIORITIES: Record<Level, number> = {trace: 7, debug: 7, info: 6, warn: 4, error: 3, fatal: 2}

export interface LoggerOptions {
  level: Settings['log_level']
  format: LogFormat
  fd: 1 | 2
  base?: Record<string, unknown>
}

export async function createLogger(options: LoggerOptions): Promise<Logger> {
  const {level, format, fd} = options
  if (format === 'json') {
    const destination = pino.destination({fd, sync: true})
    return pino(
      {
        level,
        base: {pid: process.pid, ...options.base},
        timestamp: pino.stdTimeFunctions.isoTime,
        ...redactingLogOptions(),
      },
      writesToJournal(fd) ? withSyslogPriorities(destination) : destination,
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

/** True when `fd` is connected to the journal: systemd sets JOURNAL_STREAM to that stream's device:inode (systemd.exec(5)). */
export function writesToJournal(fd: number): boolean {
  const [device, inode] = (process.env.JOURNAL_STREAM ?? '').split(':')
  if (!device || !inode) return false
  try {
    const stat = fstatSync(fd, {bigint: true})
    return stat.dev === BigInt(device) && stat.ino === BigInt(inode)
  } catch {
    return false // not numbers, or a closed descriptor
  }
}

/** Each line goes out with its level's `<N>` prefix: one stream per level, each line to its own level's alone (dedupe). */
function withSyslogPriorities(destination: DestinationStream) {
  const streams = Object.entries(SYSLOG_PRIORITIES).map(([level, priority]) => ({
    level: level as Level,
    stream: {write: (line: string) => destination.write(`<${priority}>${line}`)},
  }))
  return pino.multistream(streams, {dedupe: true})
}
