// The retry rule of every lane, decided here and handed to the store as a time.
//
// - An attempt is counted when the host was asked (for a cleanup: the artifact store) — in the
//   write that records what came of it, never at a claim: a pass killed between claiming a row and
//   reaching the host spends nothing, and a row's attempts never exceed the times the host was asked.
// - A row put back because it could not be served — its host unreachable, answering 5xx/429, cut
//   off or timing out, fenced, or its Worker busy with another deploy — *waits*: it comes due again
//   after the ladder's step for its consecutive waits (the last step repeats), ± jitter, and never
//   fails for it. A row waiting for a host it could not reach is due at once when a pass finds that
//   host answering again (./pass/host-wake.ts).
// - A row whose request reached the host and got an answer that may be right next time (a read back
//   that does not match, a body the kit does not understand, a refusal while reading back) is a
//   *failed attempt*: it comes due after the ladder's step for its attempts, or — once they reach
//   `backoff.max_attempts` — never (it settles `failed`). A failed attempt ends the run of waits.
// - An answer that says the row itself is bad (a 4xx refusal) settles it `failed` at once: the
//   caller's, not a retry.
import type {Settings} from '../config/schema.js'
import {ProviderError} from '../provider/types.js'

/** Why a row is tried again later: it waits (the host or the Worker could not serve it), or its attempt failed. */
export type RetryCause = 'wait' | 'failed_attempt'

/** The host refused the connection or could not be found: nothing was sent, so nothing was asked. */
export const EDGE_HOST_UNREACHABLE = 'edge_host_unreachable'

/** When the row is due again (null: its attempts ran out, it fails), and its run of consecutive waits from now on. */
export interface RetryPlan {
  nextAttemptAt: number | null
  waits: number
}

/**
 * The plan for a row tried again later. `row`: its attempts counting this run's (if it asked the
 * host) and its waits so far.
 */
export function retryPlan(
  backoff: Settings['backoff'],
  cause: RetryCause,
  row: {attempts: number; waits: number},
  now: number,
  random: () => number = Math.random,
): RetryPlan {
  if (cause === 'wait') return {nextAttemptAt: now + backoffDelayMs(row.waits + 1, backoff, random), waits: row.waits + 1}
  return {nextAttemptAt: nextAttemptAt(backoff, row.attempts, now, random), waits: 0}
}

/** How a failed provider call retries: a host that could not serve the request is waited for; any other answer is a failed attempt. */
export function retryCauseOf(error: ProviderError): RetryCause {
  if (error.kind === 'fenced' || error.kind === 'ambiguous') return 'wait'
  if (error.kind === 'retryable' && error.code !== 'edge_host_bad_response') return 'wait'
  return 'failed_attempt'
}

/** Whether a failed call reached the host (it counts as an attempt): everything but a connection that never opened. */
export function askedHost(error: unknown): boolean {
  return !(error instanceof ProviderError && error.code === EDGE_HOST_UNREACHABLE)
}

/** When a row that has made `attempts` attempts is tried again, or null: its attempts ran out. */
export function nextAttemptAt(backoff: Settings['backoff'], attempts: number, now: number, random: () => number = Math.random): number | null {
  return attempts >= backoff.max_attempts ? null : now + backoffDelayMs(attempts, backoff, random)
}

/** Delay before try `n` (≥ 1) of a row: ladder step n-1 (last step repeats), ± jitter. */
export function backoffDelayMs(n: number, backoff: Settings['backoff'], random: () => number = Math.random): number {
  const ladder = backoff.ladder_seconds
  const baseMs = ladder[Math.min(Math.max(n, 1) - 1, ladder.length - 1)]! * 1000
  const jitterMs = baseMs * backoff.jitter_ratio * (2 * random() - 1)
  return Math.max(0, Math.round(baseMs + jitterMs))
}
