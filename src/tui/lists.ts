// The status view's list panels as plain lines (no Ink): what each panel lists, the rows of a
// failed/uncertain group, the drill-in lines of a row, and a list drawn around its selected row.
import type {OutboxRowDetail} from '../engine/status/actions.js'
import type {ErrorGroupKey} from '../engine/status/source.js'
import type {StatusSnapshot} from '../engine/status/snapshot.js'
import type {AuditRow, OutboxRowSummary} from '../store/index.js'
import type {Filterable, RowFilter} from './filter.js'
import {clip, columnWidths, formatCount, formatDuration, formatWindow, isoTime, shortId, tableLine, type Column} from './format.js'
import type {Line, PanelName} from './panels.js'

/** A row of a list: its cells, what the filter sees, and what Enter opens or r/c act on. */
export interface ListItem {
  cells: string[]
  filterable: Filterable
  tone?: Line['color']
  /** Enter opens this. */
  open?: OpenTarget
  /** r (retry) and c (cancel) act on this outbox row. */
  outboxId?: string
  /** t opens the live tail of this script. */
  tailScript?: string
  /** b rolls back the Worker of this department. */
  rollbackDepartment?: string
}

export type OpenTarget = {kind: 'group'; group: ErrorGroupKey} | {kind: 'row'; id: string} | {kind: 'fields'; title: string; lines: string[]}

export interface PanelList {
  columns: Column[]
  items: ListItem[]
  empty: string
}

export function panelList(panel: PanelName, snapshot: StatusSnapshot): PanelList {
  const now = Date.parse(snapshot.takenAt)
  switch (panel) {
    case 'leased':
      return {
        columns: [
          {header: 'ID', width: 8},
          {header: 'LANE', width: 16},
          {header: 'DEPARTMENT', width: 14},
          {header: 'OWNER', width: 'flex'},
          {header: 'LEFT', width: 8, align: 'right'},
          {header: 'ATT', width: 3, align: 'right'},
        ],
        items: snapshot.leased.map((row) => ({
          cells: [
            shortId(row.id),
            row.operation,
            rowSubject(row),
            row.lease_owner ?? '-',
            row.leaseLeftMs < 0 ? `-${formatDuration(-row.leaseLeftMs)}` : formatDuration(row.leaseLeftMs),
            String(row.attempts),
          ],
          filterable: outboxFilterable(row),
          tone: row.leaseLeftMs < 0 ? 'yellow' : undefined,
          open: {kind: 'row', id: row.id},
          outboxId: row.id,
        })),
        empty: 'no leased rows',
      }
    case 'attention':
      return {
        columns: [
          {header: 'STATUS', width: 9},
          {header: 'LANE', width: 16},
          {header: 'LAST ERROR CODE', width: 'flex'},
          {header: 'ROWS', width: 7, align: 'right'},
          {header: 'LATEST', width: 8, align: 'right'},
        ],
        items: snapshot.errorGroups.map((group) => ({
          cells: [group.status, group.operation, group.last_error_code ?? '(none)', formatCount(group.count), formatDuration(now - group.latest_at)],
          filterable: {
            op: group.operation,
            status: group.status,
            code: group.last_error_code,
            text: `${group.status} ${group.operation} ${group.last_error_code ?? ''}`,
          },
          tone: 'red',
          open: {kind: 'group', group: {status: group.status, operation: group.operation, last_error_code: group.last_error_code}},
        })),
        empty: 'no failed or uncertain rows',
      }
    case 'workers': {
      const window = snapshot.workers.windowSeconds === null ? null : formatWindow(snapshot.workers.windowSeconds)
      const figure = (n: number | null) => (n === null ? '-' : formatCount(n))
      return {
        columns: [
          {header: 'DEPARTMENT', width: 20},
          {header: 'COMPANY', width: 12},
          {header: 'REQ', width: 6, align: 'right'},
          {header: 'ERR', width: 6, align: 'right'},
          {header: 'P99', width: 7, align: 'right'},
          {header: 'SPLIT', width: 7, align: 'right'},
          {header: 'LAST ERROR', width: 'flex'},
        ],
        items: snapshot.workers.workers.map((row) => ({
          cells: [
            row.department_id ?? row.script,
            row.company_id ?? '-',
            figure(row.requests),
            figure(row.errors),
            row.p99Ms === null ? '-' : `${Math.round(row.p99Ms)}ms`,
            // A gradual deployment: the current version's share / the other's.
            row.deployment.length === 2 ? row.deployment.map((share) => share.percentage).join('/') : '',
            row.lastError ?? '',
          ],
          filterable: {
            script: row.script,
            id: row.worker_id,
            text: `${row.script} ${row.department_id ?? ''} ${row.company_id ?? ''} ${row.lastError ?? ''}`,
          },
          tone: row.errorRateHigh ? 'red' : (row.errors ?? 0) > 0 ? 'yellow' : undefined,
          tailScript: row.script,
          rollbackDepartment: row.worker_id === null ? undefined : (row.department_id ?? undefined),
          open: {
            kind: 'fields',
            title: `Worker of ${row.department_id ?? row.script}`,
            lines: fieldLines([
              ['department', row.department_id ?? '- (not owned by this store)'],
              ['company', row.company_id ?? '-'],
              ['script', row.script],
              ['worker', row.worker_id ?? '-'],
              ['version', row.version_id ?? '-'],
              ['deployment', row.deployment.map((share) => `${share.version_id} ${share.percentage} %`).join(', ') || '-'],
              ['requests', window === null ? '- (the edge host did not report activity)' : `${row.requests ?? 0} in the last ${window}`],
              ['errors', `${row.errors ?? 0}${row.errorRateHigh ? ' (error rate needs attention)' : ''}`],
              ['p99', row.p99Ms === null ? '-' : `${Math.round(row.p99Ms)} ms`],
              ['last error', row.lastError ?? '-'],
              ...(row.worker_id === null ? [] : [['rollback', 'b on the Workers list: back to the version served before (asks first)'] as [string, string]]),
            ]),
          },
        })),
        empty: 'no live Workers (deploy one: edgeworkers deploy)',
      }
    }
    case 'retirements': {
      const retiring = snapshot.retirements.workers.map(
        (worker): ListItem => ({
          cells: ['retiring', worker.script_name, worker.department_id, formatDuration(now - worker.since)],
          filterable: {script: worker.script_name, id: worker.worker_id, text: `retiring ${worker.script_name} ${worker.department_id} ${worker.worker_id}`},
          tone: 'yellow',
          open: {
            kind: 'fields',
            title: `retirement of Worker ${worker.worker_id}`,
            lines: fieldLines([
              ['worker', worker.worker_id],
              ['script', worker.script_name],
              ['department', worker.department_id],
              ['worker status', worker.status],
              ['pending since', isoTime(worker.since)],
            ]),
          },
        }),
      )
      const orphans = (snapshot.orphans?.workers ?? []).map(
        (orphan): ListItem => ({
          cells: ['orphan', orphan.script_name ?? '-', orphan.worker_id, orphan.unsettled ? 'unsettled' : ''],
          filterable: {script: orphan.script_name, id: orphan.worker_id, text: `orphan ${orphan.script_name ?? ''} ${orphan.worker_id}`},
          tone: 'yellow',
          open: {
            kind: 'fields',
            title: `orphan Worker ${orphan.worker_id}`,
            lines: fieldLines([
              ['worker', orphan.worker_id],
              ['script', orphan.script_name ?? '-'],
              ['unsettled', orphan.unsettled ? 'yes: a deploy row may still touch it' : 'no'],
            ]),
          },
        }),
      )
      return {
        columns: [
          {header: 'KIND', width: 8},
          {header: 'SCRIPT', width: 20},
          {header: 'DEPARTMENT / WORKER', width: 'flex'},
          {header: 'SINCE', width: 9, align: 'right'},
        ],
        items: [...retiring, ...orphans],
        empty: snapshot.orphans === null ? 'no pending retirements (orphans are counted per scope: pair first)' : 'no pending retirements or orphans',
      }
    }
    case 'audit':
      return {
        columns: [
          {header: 'AGE', width: 7, align: 'right'},
          {header: 'ACTION', width: 'flex'},
          {header: 'RESOURCE', width: 20},
          {header: 'ACTOR', width: 12},
          {header: 'RESULT', width: 7},
        ],
        items: snapshot.audit.map((row) => ({
          cells: [
            formatDuration(now - row.created_at),
            row.action,
            `${row.resource_type}:${row.resource_id}`,
            row.actor_id ? `${row.actor_type}:${row.actor_id}` : row.actor_type,
            row.result,
          ],
          filterable: {
            id: row.id,
            code: row.reason_code,
            text: `${row.action} ${row.resource_type} ${row.resource_id} ${row.actor_type} ${row.actor_id} ${row.result}`,
          },
          open: {kind: 'fields', title: `audit row ${row.id}`, lines: auditLines(row)},
        })),
        empty: 'no audit rows',
      }
  }
}

/** What an outbox row is about, as the lists name it: its department, else its script (a row of no Worker: -). */
export function rowSubject(row: Pick<OutboxRowSummary, 'department_id' | 'script_name'>): string {
  return row.department_id ?? row.script_name ?? '-'
}

export function outboxFilterable(
  row: Pick<OutboxRowSummary, 'id' | 'operation' | 'status' | 'script_name' | 'company_id' | 'department_id' | 'last_error_code' | 'lease_owner'>,
): Filterable {
  return {
    id: row.id,
    op: row.operation,
    status: row.status,
    script: row.script_name,
    code: row.last_error_code,
    text: [row.id, row.operation, row.status, row.company_id, row.department_id, row.script_name, row.last_error_code, row.lease_owner]
      .filter(Boolean)
      .join(' '),
  }
}

export function groupRowsList(rows: OutboxRowSummary[], now: number): PanelList {
  return {
    columns: [
      {header: 'ID', width: 8},
      {header: 'DEPARTMENT', width: 20},
      {header: 'ATT', width: 3, align: 'right'},
      {header: 'UPDATED', width: 8, align: 'right'},
      {header: 'NEXT ATTEMPT', width: 'flex'},
    ],
    items: rows.map((row) => ({
      cells: [
        shortId(row.id),
        rowSubject(row),
        String(row.attempts),
        formatDuration(now - row.updated_at),
        row.next_attempt_at === null ? '-' : isoTime(row.next_attempt_at),
      ],
      filterable: outboxFilterable(row),
      open: {kind: 'row', id: row.id},
      outboxId: row.id,
    })),
    empty: 'no rows in this group any more',
  }
}

/** The drill-in view of an outbox row: ids, script, attempts, lease, error, timestamps, then the redacted payload. */
export function rowDetailLines(row: OutboxRowDetail): string[] {
  return [
    ...fieldLines([
      ['id', row.id],
      ['lane, status', `${row.operation}, ${row.status}`],
      ['scope', row.dispatch_namespace],
      ['dedupe key', row.dedupe_key],
      ['company, dept', `${row.company_id ?? '-'}, ${row.department_id ?? '-'}`],
      ['worker', row.worker_id ?? '-'],
      ['version', row.version_id ?? '-'],
      ['script', row.script_name ?? '-'],
      ['attempts', `${row.attempts}, next attempt ${isoTime(row.next_attempt_at)}`],
      ['lease', row.lease_owner === null ? '-' : `${row.lease_owner} until ${isoTime(row.lease_expires_at)}`],
      ['last error', row.last_error_code === null ? '-' : `${row.last_error_code}: ${row.last_error ?? ''}`],
      ['created, updated', `${isoTime(row.created_at)}, ${isoTime(row.updated_at)}`],
    ]),
    'payload (secret-bearing fields redacted):',
    ...JSON.stringify(row.payload, null, 2)
      .split('\n')
      .map((line) => `  ${line}`),
  ]
}

function auditLines(row: AuditRow): string[] {
  return [
    ...fieldLines([
      ['id', row.id],
      ['action', row.action],
      ['resource', `${row.resource_type} ${row.resource_id}`],
      ['actor', `${row.actor_type} ${row.actor_id || '-'}`],
      ['auth method', row.auth_method],
      ['result', row.result],
      ['reason code', row.reason_code ?? '-'],
      ['digest', row.digest ?? '-'],
      ['created', isoTime(row.created_at)],
    ]),
    'facts (secret-bearing fields redacted):',
    ...JSON.stringify(row.facts, null, 2)
      .split('\n')
      .map((line) => `  ${line}`),
  ]
}

function fieldLines(entries: Array<[string, string]>): string[] {
  const width = Math.max(...entries.map(([key]) => key.length))
  return entries.map(([key, value]) => `${key.padEnd(width)}  ${value}`)
}

/** The rows of `list` the filter lets through. */
export function visibleItems(list: PanelList, filter: RowFilter | null): ListItem[] {
  return filter ? list.items.filter((item) => filter.matches(item.filterable)) : list.items
}

/** The list's header and the rows around `selected` (scrolled so it shows), in at most `height` lines. */
export function listLines(list: PanelList, items: ListItem[], filtered: boolean, selected: number, height: number, width: number): Line[] {
  const widths = columnWidths(list.columns, width)
  const header: Line = {
    text: tableLine(
      list.columns.map((column) => column.header),
      list.columns,
      widths,
      width,
    ),
    bold: true,
  }
  if (items.length === 0) return [header, {text: clip(filtered ? `${list.empty} matching the filter` : list.empty, width), color: 'gray'}]
  const rowsHeight = Math.max(1, height - 1)
  const first = Math.min(Math.max(0, selected - rowsHeight + 1), Math.max(0, items.length - rowsHeight))
  const visible = items.slice(first, first + rowsHeight).map(
    (item, i): Line => ({
      text: tableLine(item.cells, list.columns, widths, width).padEnd(width),
      color: item.tone,
      inverse: first + i === selected,
    }),
  )
  return [header, ...visible]
}
