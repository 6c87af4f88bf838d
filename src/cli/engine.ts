// The CLI's logger: pino JSON lines on stderr (journald and cron mail read them), stdout stays
// for the command's own output.
import pino from 'pino'
import type {Settings} from '../config/schema.js'
import type {EngineLogger} from '../engine/context.js'
import {redactingLogOptions} from '../util/log-redaction.js'

export function cliLogger(level: Settings['log_level']): EngineLogger {
  return pino({level, base: {pid: process.pid}, timestamp: pino.stdTimeFunctions.isoTime, ...redactingLogOptions()}, pino.destination({fd: 2, sync: true}))
}
