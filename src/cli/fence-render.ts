// Text rendering of fences and the deferred-republish tally, shared by the fence and republish commands.
import type {FenceView} from '../engine/fence/fence.js'
import type {LaneSummary} from '../engine/pass/index.js'
import {formatDuration} from '../engine/status/snapshot.js'
import {fields} from './table.js'

export function fenceFields(fence: FenceView): string {
  return fields([
    ['fence', fence.id],
    ['scope', fence.scope],
    ['state', fence.endReason ? `${fence.state} (${fence.endReason})` : fence.state],
    ['reason', fence.reason],
    ['began', fence.beganAt],
    ['expires', `${fence.expiresAt}${fence.state === 'ended' ? '' : ` (${timeLeft(fence.expiresAt)})`}`],
    ...(fence.endedAt ? ([['ended', fence.endedAt]] as Array<[string, string]>) : []),
  ])
}

export function timeLeft(iso: string, now = Date.now()): string {
  const ms = Date.parse(iso) - now
  return ms <= 0 ? `overdue by ${formatDuration(-ms)}` : `${formatDuration(ms)} left`
}

export function republishLine(summary: LaneSummary): string {
  if (summary.skippedReason) return `republish: nothing dispatched (${summary.skippedReason})`
  const parts = [`${summary.claimed} deferred deploy${summary.claimed === 1 ? '' : 's'} claimed`, `${summary.completed} completed`]
  for (const key of ['retried', 'failed', 'uncertain', 'skipped'] as const) if (summary[key] > 0) parts.push(`${summary[key]} ${key}`)
  return `republish: ${parts.join(', ')}${summary.error ? ` — lane error: ${summary.error}` : ''}`
}
