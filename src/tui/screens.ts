// The status view's screens and what it draws of them, as plain lines (no Ink): the drill-in screens
// and overlays the operator opens, the open panel or screen, the message line and the key hints.
import type {ActionDone, OutboxRowDetail} from '../engine/status/actions.js'
import type {ErrorGroupKey} from '../engine/status/source.js'
import type {StatusSnapshot} from '../engine/status/snapshot.js'
import {LANE_NAMES} from '../engine/pass/lane.js'
import type {OutboxRowSummary} from '../store/index.js'
import type {RowFilter} from './filter.js'
import {clip, wrap, wrapHanging} from './format.js'
import {listLines, rowDetailLines, type ListItem, type PanelList} from './lists.js'
import {tabsLine, type Line, type PanelName} from './panels.js'

export type Screen =
  | {kind: 'group'; group: ErrorGroupKey; rows: OutboxRowSummary[] | null; error: string | null; selected: number}
  | {kind: 'row'; id: string; detail: OutboxRowDetail | null | undefined; error: string | null; scroll: number}
  | {kind: 'fields'; title: string; lines: string[]; scroll: number}
  /** A live tail: its newest lines; leaving the screen stops it. */
  | {kind: 'tail'; script: string; lines: string[]; notice: string | null; stop: AbortController}

export type Overlay =
  | {kind: 'help'}
  | {kind: 'filter'; text: string; error?: string}
  | {kind: 'lanes'}
  | {kind: 'confirm'; prompt: string; busy: string; run: () => Promise<ActionDone>}

export interface Message {
  tone: 'info' | 'ok' | 'error'
  text: string
}

/** The view's state at one frame: what the lines below are drawn from. */
export interface Frame {
  columns: number
  panel: PanelName
  /** The open drill-in screen; none when a panel shows. */
  top: Screen | undefined
  overlay: Overlay | null
  filter: RowFilter | null
  list: PanelList | null
  items: ListItem[]
  /** The selected row of the open panel. */
  panelSelected: number
  busy: string | null
  message: Message | null
}

/** The tab line and the open panel or screen, in `room` lines. */
export function screenLines(frame: Frame, shot: StatusSnapshot, room: number): Line[] {
  const {overlay, top, panel, filter, list, items, panelSelected, columns} = frame
  if (overlay?.kind === 'help') return helpLines(room, columns)
  if (!top) {
    return [
      tabsLine(panel, shot, filter, columns),
      ...listLines(list!, items, filter !== null, Math.min(panelSelected, Math.max(0, items.length - 1)), room - 1, columns),
    ]
  }
  if (top.kind === 'group') {
    const title: Line = {
      text: clip(
        `${top.group.status} ${top.group.operation} rows with last error ${top.group.last_error_code ?? '(none)'}${filter ? `   filter: ${filter.source}` : ''}   esc back`,
        columns,
      ),
      bold: true,
      color: 'cyan',
    }
    if (top.error) return [title, ...errorLines(`could not read the rows: ${top.error}`, columns)]
    if (!list) return [title, {text: 'loading…', color: 'gray'}]
    return [title, ...listLines(list, items, filter !== null, top.selected, room - 1, columns)]
  }
  if (top.kind === 'tail') {
    const title: Line = {text: clip(`live tail of ${top.script}   esc back`, columns), bold: true, color: 'cyan'}
    const notice: Line[] = top.notice ? wrap(top.notice, columns, ERROR_LINES).map((text) => ({text, color: 'gray'})) : []
    const shown = top.lines.slice(-Math.max(0, room - 1 - notice.length))
    return [title, ...notice, ...shown.map((text) => ({text: clip(text, columns)}))]
  }
  const title: Line = {
    text: clip(`${top.kind === 'row' ? `outbox row ${top.id}` : top.title}   ↑↓ scroll  esc back${top.kind === 'row' ? '  r retry  c cancel' : ''}`, columns),
    bold: true,
    color: 'cyan',
  }
  let body: string[]
  if (top.kind === 'fields') body = top.lines
  else if (top.error) body = wrap(`could not read the row: ${top.error}`, columns, ERROR_LINES)
  else if (top.detail === undefined) body = ['loading…']
  else if (top.detail === null) body = ['this outbox row no longer exists']
  else body = rowDetailLines(top.detail)
  const lines = body.flatMap((text) => wrapHanging(text, columns))
  const scroll = Math.min(top.scroll, Math.max(0, lines.length - (room - 1)))
  return [title, ...lines.slice(scroll, scroll + room - 1).map((text) => ({text}))]
}

/** At most this many lines carry one error or message: wrapped, so the part that says what to do shows. */
export const ERROR_LINES = 3

/** An error, wrapped into at most ERROR_LINES red lines. */
export function errorLines(text: string, columns: number, bold = false): Line[] {
  return wrap(text, columns, ERROR_LINES).map((line) => ({text: line, color: 'red', bold}))
}

/** The prompt, busy note or message above the key hints: one line, or a wrapped message. */
export function bottomLines(frame: Frame): Line[] {
  const {overlay, busy, message, columns} = frame
  if (overlay?.kind === 'filter') {
    return overlay.error
      ? errorLines(overlay.error, columns, true)
      : [{text: clip('op: status: code: script: id: or plain words · enter applies · esc cancels', columns), color: 'gray'}]
  }
  if (overlay?.kind === 'lanes')
    return [{text: clip(`run one pass: ${LANE_NAMES.map((lane, i) => `${i + 1} ${lane}`).join('  ')}`, columns), color: 'cyan', bold: true}]
  if (overlay?.kind === 'confirm') return [{text: `${clip(overlay.prompt, columns - 6)} [y/N]`, color: 'yellow', bold: true}]
  if (busy) return [{text: clip(busy, columns), color: 'yellow'}]
  if (message) {
    const color = message.tone === 'error' ? 'red' : message.tone === 'ok' ? 'green' : undefined
    return wrap(message.text, columns, ERROR_LINES).map((text) => ({text, color}))
  }
  return [{text: ''}]
}

/**
 * Every key's hint, in the first form that fits: spaced out, then packed with the key joined to a
 * shorter word (80 columns hold every key); the packed form is cut only below that.
 */
export function keysLine(frame: Frame): Line {
  const {overlay, top, columns, panel} = frame
  if (overlay?.kind === 'filter') return {text: clip(`filter: ${overlay.text}█`, columns), color: 'cyan', bold: true}
  // On the Workers panel r and c have no outbox row to act on; b (rollback) takes their place.
  const rowKeys =
    !top && panel === 'workers'
      ? [['b rollback'], ['b:rollback']]
      : [
          ['r retry', 'c cancel'],
          ['r:retry', 'c:cancel'],
        ]
  const spaced = top
    ? ['↑↓ move', 'enter open', 'esc back', ...rowKeys[0]!, 'p pass', '/ filter', '? keys', 'q quit']
    : ['tab/←→ panel', '↑↓ row', 'enter open', 't tail', ...rowKeys[0]!, 'p pass', '/ filter', '? keys', 'q quit']
  const packed = top
    ? ['↑↓:move', '⏎:open', 'esc:back', ...rowKeys[1]!, 'p:pass', '/:filter', '?:keys', 'q:quit']
    : ['tab/←→:panel', '↑↓:row', '⏎:open', 't:tail', ...rowKeys[1]!, 'p:pass', '/:filter', '?:keys', 'q:quit']
  const wide = spaced.join('  ')
  return {text: wide.length <= columns ? wide : clip(packed.join(' '), columns), color: 'gray'}
}

const HELP: Array<[string, string]> = [
  ['tab, →, l / shift-tab, ←, h', 'next / previous panel (Leased, Failed/uncertain, Workers, Retirements, Audit)'],
  ['↑ ↓, j k, PgUp PgDn', 'move between rows; scroll a row’s details'],
  ['enter', 'open: a failed/uncertain group lists its rows; a row shows ids, lease, error, payload'],
  ['esc, backspace', 'back'],
  ['t', 'Workers panel: open the live tail of the selected Worker (esc leaves it)'],
  ['b', 'Workers panel: roll the selected Worker back to the version served before (asks first)'],
  ['r', 'retry the selected outbox row now (asks first; refused while a runner holds its lease)'],
  ['c', 'cancel the selected outbox row (asks first; refused while leased or deploying)'],
  ['p', 'run one pass of a lane (recovery, deferred, artifact_cleanup, control_audit, host_reconcile)'],
  ['/', 'filter rows: op:deploy status:failed code:edge_host_5xx script:dw-3f id:3f2b words'],
  ['?', 'this help (any key closes it)'],
  ['q, ctrl-c', 'quit'],
]

function helpLines(room: number, columns: number): Line[] {
  const width = Math.max(...HELP.map(([keys]) => keys.length))
  const title: Line = {text: 'keys', bold: true, color: 'cyan'}
  return [title, ...HELP.map(([keys, what]) => ({text: clip(`${keys.padEnd(width)}  ${what}`, columns)}))].slice(0, Math.max(1, room))
}
