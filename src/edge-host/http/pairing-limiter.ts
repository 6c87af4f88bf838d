// Failed pairing attempts, per source address. A pairing code is short enough to guess given
// enough tries, so a source that fails `maxFailures` times within the window is refused (429) until
// the window ends. Logging is sampled: the first failure of a source per window and the moment it
// is locked out, never one line per attempt (a guessing peer would otherwise flood the log).
import type {Logger} from 'pino'
import {HostError} from '../errors.js'

/** Sources remembered at once; past it the oldest are forgotten (each holds a few dozen bytes). */
const MAX_SOURCES = 10_000

export class PairingRateLimited extends HostError {
  constructor(readonly retryAfterSeconds: number) {
    super('pairing_rate_limited', `too many failed pairing attempts from this address; retry in ${retryAfterSeconds}s`)
  }
}

interface Attempts {
  windowStartMs: number
  failures: number
}

export class PairingLimiter {
  private readonly sources = new Map<string, Attempts>()

  constructor(private readonly options: {maxFailures: number; windowSeconds: number; log: Logger; now?: () => number}) {}

  /** Seconds until `source` may try again, or 0 when it may try now. */
  retryAfterSeconds(source: string): number {
    const attempts = this.current(source)
    if (!attempts || attempts.failures < this.options.maxFailures) return 0
    return Math.max(1, Math.ceil((attempts.windowStartMs + this.options.windowSeconds * 1000 - this.now()) / 1000))
  }

  recordFailure(source: string): void {
    let attempts = this.current(source)
    if (!attempts) {
      if (this.sources.size >= MAX_SOURCES) this.sources.delete(this.sources.keys().next().value!)
      attempts = {windowStartMs: this.now(), failures: 0}
      this.sources.set(source, attempts)
    }
    attempts.failures++
    if (attempts.failures === 1) this.options.log.warn({source}, 'pairing attempt with a wrong code')
    if (attempts.failures === this.options.maxFailures) {
      this.options.log.warn(
        {source, failures: attempts.failures, windowSeconds: this.options.windowSeconds},
        'pairing attempts from this source are refused until the window ends',
      )
    }
  }

  private current(source: string): Attempts | undefined {
    const attempts = this.sources.get(source)
    if (attempts && this.now() - attempts.windowStartMs >= this.options.windowSeconds * 1000) {
      this.sources.delete(source)
      return undefined
    }
    return attempts
  }

  private now(): number {
    return (this.options.now ?? Date.now)()
  }
}
