// How `edgeworkers tail` prints an event in a terminal: one line for the request, then its console
// lines (by level) and uncaught exceptions with their stacks, indented under it; and the host's
// notice of events it left out under volume, as one line.
import {styleText} from 'node:util'
import {isErrorEvent, isTailEvent, type TailEvent, type TailLine, type TailSampled} from '../protocol/tail.js'

type Style = Parameters<typeof styleText>[0]

const LEVEL_STYLE: Record<TailEvent['logs'][number]['level'], Style> = {
  debug: 'gray',
  log: 'reset',
  info: 'cyan',
  warn: 'yellow',
  error: 'red',
}

export function renderTailLine(line: TailLine, color: boolean): string {
  return isTailEvent(line) ? renderTailEvent(line, color) : renderSampled(line, color)
}

function renderSampled(notice: TailSampled, color: boolean): string {
  const text = `sampling: ${notice.skipped} events skipped in the last second because of volume (a tail gets at most ${notice.maxEventsPerSecond} per second)`
  return color ? styleText('yellow', text) : text
}

function renderTailEvent(event: TailEvent, color: boolean): string {
  const paint = (style: Style, text: string) => (color ? styleText(style, text) : text)
  const failed = isErrorEvent(event)
  const head = [
    paint('gray', event.time),
    paint('bold', event.method),
    event.path,
    paint(failed ? 'red' : 'green', event.status === null ? '-' : String(event.status)),
    paint(failed ? 'red' : 'green', event.outcome),
    paint('gray', `${Math.round(event.durationMs)}ms`),
    ...(event.asset ? [paint('cyan', '(asset)')] : []),
  ].join(' ')
  const lines = [head]
  for (const line of event.logs) lines.push(`  ${paint(LEVEL_STYLE[line.level], `[${line.level}]`)} ${line.message}`)
  for (const exception of event.exceptions) {
    lines.push(`  ${paint('red', `✖ ${exception.name}: ${exception.message}`)}`)
    for (const frame of exception.stack.split('\n').filter((text) => text.trim() !== '')) lines.push(`    ${paint('gray', frame.trim())}`)
  }
  if (event.truncated) lines.push(`  ${paint('yellow', '(workerd cut the logs of this request short)')}`)
  return lines.join('\n')
}
