// What each part of the status view above the open panel shows, as plain lines (no Ink): the header,
// the host and gates, what needs attention, the lanes table and the panel tabs (the panels' lists are
// ./lists.ts). Building text here, sized to the terminal, keeps the Ink components trivial and the
// layout testable.
import type {StatusSnapshot} from '../engine/status/snapshot.js'
import type {HostView} from '../engine/hosts/manage.js'
import {hostLine} from '../cli/hosts-render.js'
import type {RowFilter} from './filter.js'
import {clip, columnWidths, formatCount, formatDuration, formatInterval, formatWindow, shortId, tableLine, wrap, type Column} from './format.js'

export interface Line {
  text: string
  color?: 'green' | 'yellow' | 'red' | 'cyan' | 'gray'
  bold?: boolean
  inverse?: boolean
}

export const PANELS = ['leased', 'attention', 'workers', 'retirements', 'audit'] as const
export type PanelName = (typeof PANELS)[number]

const PANEL_TITLES: Record<PanelName, string> = {
  leased: 'Leased',
  attention: 'Failed/uncertain',
  workers: 'Workers',
  retirements: 'Retirements',
  audit: 'Audit',
}

export function headerLine(snapshot: StatusSnapshot | null, intervalMs: number, width: number): Line {
  const scope = snapshot ? (snapshot.scope ?? 'no scope (not paired)') : '…'
  const store = snapshot ? `${snapshot.store.backend} ${snapshot.store.location}` : ''
  const time = snapshot ? `${snapshot.takenAt.slice(11, 19)}Z every ${formatInterval(intervalMs)}` : ''
  const left = `edgeworkers status  ${scope}`
  const right = `${time}  ? keys`
  const middle = clip(store, Math.max(0, width - left.length - right.length - 4))
  const text = `${left}  ${middle}`
  return {text: clip(`${text.padEnd(Math.max(text.length, width - right.length - 1))} ${right}`, width), bold: true}
}

/** The host's health (for a kit of several hosts, then one line per host: health and lag), then the fence and the gates. */
export function hostLines(snapshot: StatusSnapshot, width: number): Line[] {
  const {host} = snapshot
  let health: Line
  if (!host.paired) {
    health = {text: `host  not usable: ${host.problem}`, color: 'red'}
  } else if (!host.reachable) {
    health = {text: `host  DOWN ${host.pairing?.host_url ?? ''}: ${host.error}`, color: 'red'}
  } else {
    const shards = host.shards ?? []
    const scripts = host.scripts ?? {active: 0, locked_down: 0, retired: 0}
    const ready = host.ready ? 'ready' : 'NOT READY'
    health = {
      text: `host  up ${host.pairing?.host_url ?? ''}  ${ready}  shards ${host.shardsUp}/${shards.length} up  scripts ${scripts.active} live, ${scripts.locked_down} locked, ${scripts.retired} retired`,
      color: host.ready ? 'green' : 'yellow',
    }
  }
  const parts: string[] = []
  let tone: Line['color']
  const fence = snapshot.fence
  if (fence) {
    parts.push(
      fence.overdue
        ? `fence ${shortId(fence.id)} OVERDUE ${formatDuration(-fence.timeLeftMs)} (${fence.reason})`
        : `fence ${shortId(fence.id)} ${fence.state}, ${formatDuration(fence.timeLeftMs)} left (${fence.reason})`,
    )
    tone = fence.overdue ? 'red' : 'yellow'
  } else {
    parts.push('fence none')
  }
  if (host.fence && host.fence.fenceId !== fence?.id) parts.push(`host holds fence ${shortId(host.fence.fenceId)} the store does not show`)
  parts.push(snapshot.maintenance.on ? `maintenance ON (${snapshot.maintenance.reason ?? 'no reason'})` : 'maintenance off')
  if (snapshot.restorePending.on) parts.push(`restore PENDING (${snapshot.restorePending.reason ?? 'verify with a pass'})`)
  if (snapshot.maintenance.on || snapshot.restorePending.on) tone ??= 'yellow'
  return [{...health, text: clip(health.text, width)}, ...memberLines(host.hosts, width), {text: clip(`gates ${parts.join('  ')}`, width), color: tone}]
}

const HEALTH_COLORS: Record<HostView['health'], Line['color']> = {current: 'green', unconfirmed: 'yellow', behind: 'yellow', unreachable: 'red'}

/** Each host of a kit of several: the line `host list` prints, colored by its health. */
function memberLines(hosts: HostView[], width: number): Line[] {
  if (hosts.length < 2) return []
  return hosts.map((member) => ({text: clip(`  ${hostLine(member)}`, width), color: HEALTH_COLORS[member.health]}))
}

/** At most this many lines say what needs attention; the Failed/uncertain and Workers panels list the rest. */
export const ATTENTION_LINES = 3

/** What needs attention, wrapped (never cut where it says what to do). */
export function attentionLines(snapshot: StatusSnapshot, width: number): Line[] {
  if (snapshot.attention.length === 0) return [{text: clip('ok    nothing needs attention', width), color: 'green'}]
  return wrap(`ATTN  ${snapshot.attention.join('; ')}`, width, ATTENTION_LINES).map((text) => ({text, color: 'red', bold: true}))
}

/** The panel the view opens on: the one that shows what needs attention. */
export function openingPanel(snapshot: StatusSnapshot): PanelName {
  if (snapshot.errorGroups.length > 0) return 'attention'
  if (snapshot.workers.workers.some((row) => row.errorRateHigh)) return 'workers'
  return 'leased'
}

export function lanesLines(snapshot: StatusSnapshot, width: number): Line[] {
  const window = formatWindow(snapshot.finishedWindowSeconds)
  const columns: Column[] = [
    {header: 'LANE', width: 16},
    {header: 'PEND', width: 6, align: 'right'},
    {header: 'DEFER', width: 6, align: 'right'},
    {header: 'DUE AGE', width: 7, align: 'right'},
    {header: 'LEASED', width: 6, align: 'right'},
    {header: 'EXP AGE', width: 7, align: 'right'},
    {header: 'FAIL', width: 6, align: 'right'},
    {header: 'UNCERT', width: 6, align: 'right'},
    {header: `DONE/${window}`, width: 8, align: 'right'},
  ]
  // The cancelled count is the first thing to go on a narrow terminal.
  if (width >= 88) columns.push({header: `CANC/${window}`, width: 8, align: 'right'})
  const widths = columnWidths(columns, width)
  const age = (ms: number | null) => (ms === null ? '-' : formatDuration(ms))
  const rows = snapshot.lanes.map((lane): Line => {
    const cells = [
      lane.operation,
      formatCount(lane.pending),
      formatCount(lane.deferred),
      age(lane.oldestDueAgeMs),
      formatCount(lane.leased),
      age(lane.oldestExpiredLeaseAgeMs),
      formatCount(lane.failed),
      formatCount(lane.uncertain),
      formatCount(lane.completed),
      formatCount(lane.cancelled),
    ]
    return {text: tableLine(cells, columns, widths, width), color: lane.failed + lane.uncertain > 0 ? 'red' : undefined}
  })
  return [
    {
      text: tableLine(
        columns.map((column) => column.header),
        columns,
        widths,
        width,
      ),
      bold: true,
    },
    ...rows,
  ]
}

export function tabsLine(panel: PanelName, snapshot: StatusSnapshot, filter: RowFilter | null, width: number): Line {
  const counts: Record<PanelName, string> = {
    leased: formatCount(snapshot.lanes.reduce((sum, lane) => sum + lane.leased, 0)),
    attention: formatCount(snapshot.errorGroups.reduce((sum, group) => sum + group.count, 0)),
    workers: formatCount(snapshot.workers.total),
    retirements: `${snapshot.retirements.pending}+${snapshot.orphans?.pending ?? 0}`,
    audit: String(snapshot.audit.length),
  }
  const tabs = PANELS.map((name) => (name === panel ? `[${PANEL_TITLES[name]} ${counts[name]}]` : ` ${PANEL_TITLES[name]} ${counts[name]} `)).join(' ')
  return {text: clip(`${tabs}${filter ? `   filter: ${filter.source}` : ''}`, width), bold: true, color: 'cyan'}
}
