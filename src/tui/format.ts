// Text layout for the status view: every line is built to fit the terminal's width exactly, so Ink
// never wraps and the view's height is known before Ink draws it; text that must be read whole (what
// needs attention, errors) is wrapped here into a bounded number of lines.
import {formatDuration} from '../engine/status/snapshot.js'

export {formatDuration, formatWindow} from '../engine/status/snapshot.js'
import {messageOf} from '../errors.js'

/** A refresh interval: 2s, 1m30s — or 500ms when it is not whole seconds. */
export function formatInterval(ms: number): string {
  return ms % 1000 === 0 ? formatDuration(ms) : `${ms}ms`
}

/** 999, 12.3k, 1.2M: a count in at most 6 characters. */
export function formatCount(n: number): string {
  if (n < 100_000) return String(n)
  if (n < 1_000_000) return `${Math.round(n / 1000)}k`
  return `${(n / 1_000_000).toFixed(n < 10_000_000 ? 1 : 0)}M`
}

/** The first 8 characters of an id (a UUID's first group): enough to tell rows apart on screen. */
export function shortId(id: string): string {
  return id.slice(0, 8)
}

export function isoTime(ms: number | null): string {
  return ms === null ? '-' : new Date(Number(ms)).toISOString()
}

/** Cuts to `width` characters, marking the cut with `…`. */
export function clip(text: string, width: number): string {
  if (width <= 0) return ''
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`
}

/**
 * `text` in lines of at most `width` characters, broken between words (a word longer than a line is
 * cut across lines), at most `maxLines` of them: the last marks with `…` what did not fit.
 */
export function wrap(text: string, width: number, maxLines: number): string[] {
  if (width <= 0 || maxLines <= 0) return []
  const lines: string[] = []
  let rest = text.trim()
  while (rest.length > 0 && lines.length < maxLines) {
    if (lines.length === maxLines - 1 || rest.length <= width) {
      lines.push(clip(rest, width))
      break
    }
    const space = rest.lastIndexOf(' ', width)
    const cut = space > 0 ? space : width
    lines.push(rest.slice(0, cut).trimEnd())
    rest = rest.slice(cut).trimStart()
  }
  return lines.length === 0 ? [''] : lines
}

/**
 * A drill-in line (`key  value`, or a payload line) in lines of at most `width` characters, none
 * dropped: continuation lines start under the value, so a long error shows whole, down to the part
 * that says what to do.
 */
export function wrapHanging(text: string, width: number): string[] {
  if (text.length <= width) return [text]
  const valueAt = /^\S.*?\s{2,}(?=\S)/.exec(text)?.[0].length ?? text.length - text.trimStart().length
  const indent = Math.min(valueAt, Math.floor(width / 2))
  const [first = '', ...rest] = wrap(text.slice(indent), width - indent, Number.MAX_SAFE_INTEGER)
  return [text.slice(0, indent) + first, ...rest.map((line) => ' '.repeat(indent) + line)]
}

export interface Column {
  header: string
  /** Fixed width, or 'flex': the flexible columns share what the fixed ones leave. */
  width: number | 'flex'
  align?: 'left' | 'right'
}

/** Widths for `columns` in `total` characters with one space between columns; flex columns get at least 4. */
export function columnWidths(columns: Column[], total: number): number[] {
  const fixed = columns.reduce((sum, column) => sum + (column.width === 'flex' ? 0 : column.width), 0)
  const flexCount = columns.filter((column) => column.width === 'flex').length
  const spare = Math.max(0, total - fixed - (columns.length - 1))
  const flexWidth = flexCount === 0 ? 0 : Math.max(4, Math.floor(spare / flexCount))
  return columns.map((column) => (column.width === 'flex' ? flexWidth : column.width))
}

/** One table line: each cell clipped and padded to its column, the whole clipped to `total`. */
export function tableLine(cells: string[], columns: Column[], widths: number[], total: number): string {
  const line = cells
    .map((cell, i) => {
      const width = widths[i] ?? 0
      const clipped = clip(cell, width)
      return columns[i]?.align === 'right' ? clipped.padStart(width) : clipped.padEnd(width)
    })
    .join(' ')
  return clip(line.trimEnd(), total)
}

/** An error as the view shows it: its first line. */
export const firstLineOf = (error: unknown) => messageOf(error).split('\n')[0]!
