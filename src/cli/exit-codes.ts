// The documented exit codes (README "Exit codes"). Commands never pick a number themselves.
import type {DeployState} from '../engine/deploy/deploy-worker.js'
import type {KitErrorCode} from '../errors.js'

export const ExitCode = {
  ok: 0,
  internal: 1,
  usage: 2,
  configInvalid: 3,
  storeUnavailable: 4,
  notFound: 5,
  refused: 6,
  pending: 7,
  failed: 8,
  uncertain: 9,
  hostUnreachable: 10,
  passSkipped: 11,
  laneError: 12,
  /** `status`: something needs an operator (failed or uncertain rows, no usable host, a fence overdue). */
  attention: 13,
  /** Interrupted: 128 + the signal's number, as shells report it. */
  interruptedBySigint: 130,
  interruptedBySigterm: 143,
} as const
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

export const exitCodeFor: Record<KitErrorCode, ExitCode> = {
  usage: ExitCode.usage,
  config_invalid: ExitCode.configInvalid,
  store_unavailable: ExitCode.storeUnavailable,
  schema_mismatch: ExitCode.storeUnavailable,
  not_found: ExitCode.notFound,
  conflict: ExitCode.refused,
  gate_closed: ExitCode.refused,
  unpaired: ExitCode.refused,
  pending: ExitCode.pending,
  failed: ExitCode.failed,
  uncertain: ExitCode.uncertain,
  host_unreachable: ExitCode.hostUnreachable,
  host_error: ExitCode.hostUnreachable,
  internal: ExitCode.internal,
}

/** How a deploy (or a rollback, which is one) that ran its task ends the command. */
export const deployExitCode: Record<DeployState, ExitCode> = {
  completed: ExitCode.ok,
  superseded: ExitCode.refused,
  deferred: ExitCode.pending,
  pending: ExitCode.pending,
  failed: ExitCode.failed,
  uncertain: ExitCode.uncertain,
}
