// The retry rule of every lane, decided here and handed to the store as a time: after `attempts`
// attempts a row comes due again after the backoff ladder's step for that count (the last step
// repeats), ± jitter — or, once attempts reach `backoff.max_attempts`, never (it fails for good).
import type {Settings} from '../config/schema.js'

/** When a row that has made `attempts` attempts is tried again, or null: its attempts ran out. */
export function nextAttemptAt(backoff: Settings['backoff'], attempts: number, now: number, random: () => number = Math.random): number | null {
  return attempts >= backoff.max_attempts ? null : now + backoffDelayMs(attempts, backoff, random)
}

/** Delay before the next attempt once `attempts` (≥ 1) attempts were made: ladder step attempts-1 (last step repeats), ± jitter. */
export function backoffDelayMs(attempts: number, backoff: Settings['backoff'], random: () => number = Math.random): number {
  const ladder = backoff.ladder_seconds
  const baseMs = ladder[Math.min(Math.max(attempts, 1) - 1, ladder.length - 1)]! * 1000
  const jitterMs = baseMs * backoff.jitter_ratio * (2 * random() - 1)
  return Math.max(0, Math.round(baseMs + jitterMs))
}
