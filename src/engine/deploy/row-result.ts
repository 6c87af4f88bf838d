// The deploy task's result as the row's outcome (../row-result.ts): the one place it is translated,
// for the lanes that count it and for `deploy`, which reports it. Type-only import of the task: the
// lanes reach this without loading the deploy pipeline.
import {DONE, LEASE_LOST, type RowResult} from '../row-result.js'
import type {DeployTaskResult} from './task.js'

/** Why the deploy task left its row untouched: the execution gate was closed when it started. */
export const GATE_CLOSED = 'gate_closed'

export function deployRowResult(result: DeployTaskResult): RowResult {
  switch (result.outcome) {
    case 'completed':
      return DONE
    // Settled on purpose, nothing left to do: a newer version of the Worker wins.
    case 'superseded':
      return {outcome: 'done', code: result.code, message: result.message}
    case 'failed':
      return {outcome: 'terminal', code: result.code, message: result.message}
    case 'uncertain':
      return {outcome: 'uncertain', code: result.code, message: result.message}
    // Attempts ran out: the row settled `failed`.
    case 'retry':
      return result.exhausted
        ? {outcome: 'terminal', code: result.code, message: result.message}
        : {outcome: 'requeue_after', code: result.code, message: result.message}
    case 'retry_later':
      return {outcome: 'skipped', reason: GATE_CLOSED, message: result.message}
    case 'skipped':
      return {outcome: 'skipped', reason: result.disposition}
    case 'lease_lost':
      return LEASE_LOST
  }
}
