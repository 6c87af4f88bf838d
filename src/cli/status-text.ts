// `edgeworkers status` outside a terminal: one snapshot as plain text, for cron mail, monitors and
// pipes (`--json` prints the snapshot itself).
import {formatDuration, formatWindow, type StatusSnapshot} from '../engine/status/snapshot.js'
import {fields, isoTime, table} from './table.js'
import {hostLine as kitHostLine} from './hosts-render.js'

export function statusText(snapshot: StatusSnapshot): string {
  const {host} = snapshot
  const window = formatWindow(snapshot.finishedWindowSeconds)
  const hostLine = !host.paired
    ? `not usable: ${host.problem}`
    : !host.reachable
      ? `unreachable (${host.pairing?.host_url}): ${host.error}`
      : `up (${host.pairing?.host_url}), ${host.ready ? 'ready' : 'not ready'}, shards ${host.shardsUp}/${host.shards?.length ?? 0} up, scripts ${host.scripts?.active} live, ${host.scripts?.locked_down} locked down, ${host.scripts?.retired} retired`
  const fence = snapshot.fence
  const fenceLine = !fence
    ? 'none'
    : `${fence.id} ${fence.state} (${fence.reason}), ${fence.overdue ? `OVERDUE by ${formatDuration(-fence.timeLeftMs)}` : `${formatDuration(fence.timeLeftMs)} left`}, expires ${fence.expiresAt}`
  const age = (ms: number | null) => (ms === null ? '-' : formatDuration(ms))
  const sections = [
    fields([
      ['scope', snapshot.scope ?? '(not paired: rows of every scope)'],
      ['store', `${snapshot.store.backend} ${snapshot.store.location}`],
      ['taken at', snapshot.takenAt],
      ['host', hostLine],
      // A kit of several hosts: each with its health and lag (docs/many-hosts.md).
      ...host.hosts.filter(() => host.hosts.length > 1).map((member): [string, string] => ['  member', kitHostLine(member)]),
      ['fence', fenceLine],
      ['maintenance', snapshot.maintenance.on ? `on (${snapshot.maintenance.reason ?? 'no reason given'})` : 'off'],
      ['restore', snapshot.restorePending.on ? `pending (${snapshot.restorePending.reason ?? 'a pass verifies it'})` : 'not pending'],
      ['attention', snapshot.attention.length === 0 ? 'nothing needs attention' : snapshot.attention.join('; ')],
    ]),
    table(
      ['LANE', 'PENDING', 'DEFERRED', 'OLDEST DUE', 'LEASED', 'OLDEST EXPIRED LEASE', 'FAILED', 'UNCERTAIN', `COMPLETED ${window}`, `CANCELLED ${window}`],
      snapshot.lanes.map((lane) => [
        lane.operation,
        String(lane.pending),
        String(lane.deferred),
        age(lane.oldestDueAgeMs),
        String(lane.leased),
        age(lane.oldestExpiredLeaseAgeMs),
        String(lane.failed),
        String(lane.uncertain),
        String(lane.completed),
        String(lane.cancelled),
      ]),
      'no lanes',
    ),
    `leased rows\n${table(
      ['ID', 'LANE', 'SCRIPT', 'OWNER', 'LEASE LEFT', 'ATTEMPTS'],
      snapshot.leased.map((row) => [
        row.id,
        row.operation,
        row.script_name ?? '-',
        row.lease_owner ?? '-',
        row.leaseLeftMs < 0 ? `expired ${formatDuration(-row.leaseLeftMs)} ago` : formatDuration(row.leaseLeftMs),
        String(row.attempts),
      ]),
      'none',
    )}`,
    `waiting rows (host unavailable, fenced, Worker busy)\n${table(
      ['ID', 'LANE', 'STATUS', 'SCRIPT', 'REASON', 'WAITS', 'ATTEMPTS', 'NEXT ATTEMPT'],
      snapshot.waiting.map((row) => [
        row.id,
        row.operation,
        row.status,
        row.script_name ?? '-',
        row.last_error_code ?? '-',
        String(row.waits),
        String(row.attempts),
        `${isoTime(row.next_attempt_at)} (${row.dueInMs <= 0 ? 'due' : `in ${formatDuration(row.dueInMs)}`})`,
      ]),
      'none',
    )}`,
    `failed and uncertain rows by last error code\n${table(
      ['STATUS', 'LANE', 'LAST ERROR CODE', 'ROWS', 'LATEST'],
      snapshot.errorGroups.map((group) => [group.status, group.operation, group.last_error_code ?? '-', String(group.count), isoTime(group.latest_at)]),
      'none',
    )}${snapshot.supersededFailures > 0 ? `\n(${snapshot.supersededFailures} earlier failed or uncertain row${snapshot.supersededFailures === 1 ? '' : 's'} replaced by a later completed one of the same kind: history)` : ''}`,
    `pending retirements: ${snapshot.retirements.pending}; pending orphans: ${snapshot.orphans ? `${snapshot.orphans.pending} (${snapshot.orphans.unsettled} unsettled)` : 'not counted (no scope)'}${
      snapshot.retirements.workers.length + (snapshot.orphans?.workers.length ?? 0) === 0
        ? ''
        : `\n${table(
            ['KIND', 'WORKER', 'SCRIPT', 'DEPARTMENT'],
            [
              ...snapshot.retirements.workers.map((worker) => ['retiring', worker.worker_id, worker.script_name, worker.department_id]),
              ...(snapshot.orphans?.workers ?? []).map((orphan) => ['orphan', orphan.worker_id, orphan.script_name ?? '-', '-']),
            ],
            '',
          )}`
    }`,
    `workers: ${snapshot.workers.total} live${
      snapshot.workers.windowSeconds === null
        ? ' (the edge host did not report their activity)'
        : `, traffic over the last ${formatWindow(snapshot.workers.windowSeconds)}, most errors first`
    }\n${table(
      ['SCRIPT', 'COMPANY', 'DEPARTMENT', 'REQUESTS', 'ERRORS', 'P99', 'LAST ERROR'],
      snapshot.workers.workers.map((row) => [
        row.script,
        row.company_id ?? '-',
        row.department_id ?? '-',
        row.requests === null ? '-' : String(row.requests),
        row.errors === null ? '-' : String(row.errors),
        row.p99Ms === null ? '-' : `${Math.round(row.p99Ms)}ms`,
        row.lastError ?? '-',
      ]),
      'none',
    )}`,
    `latest audit rows\n${table(
      ['TIME', 'ACTION', 'RESOURCE', 'ACTOR', 'RESULT'],
      snapshot.audit.map((row) => [
        isoTime(row.created_at),
        row.action,
        `${row.resource_type} ${row.resource_id}`,
        row.actor_id ? `${row.actor_type} ${row.actor_id}` : row.actor_type,
        row.result,
      ]),
      'none',
    )}`,
  ]
  return sections.join('\n\n')
}
