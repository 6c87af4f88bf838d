// Text rendering of the kit's gates (maintenance commands).
import type {GatesStatus} from '../engine/maintenance.js'
import {fields} from './table.js'

export function gatesFields(status: GatesStatus): string {
  const gate = (on: boolean, reason: string | null) => (on ? `on (${reason ?? 'no reason given'})` : 'off')
  return fields([
    ['scope', status.scope],
    ['maintenance', gate(status.maintenance.on, status.maintenance.reason)],
    ['restore pending', gate(status.restorePending.on, status.restorePending.reason)],
    ['backup fence', status.fence ? `${status.fence.id} ${status.fence.state} until ${status.fence.expiresAt}` : 'none'],
  ])
}
