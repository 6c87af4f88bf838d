// When a shard swaps its process: restart requests arriving within the coalescing window, or while
// a swap runs, share the next swap; a runaway's neighbours are waiting, so its swap skips the window.
// A swap that fails is retried, as a crash, after the crash backoff.
import {setTimeout as sleep} from 'node:timers/promises'
import {type Waiter, waiter} from '../../util/waiter.js'
import type {RestartReason, ShardOptions} from './shard-types.js'

const CRASH_BACKOFF_MS = {first: 250, max: 30_000}

export class RestartQueue {
  private pending: Waiter<void> | null = null
  private pendingReason: RestartReason = 'deploy'
  private driving = false
  /** The swap running now, if any. */
  current: Promise<void> | null = null
  private consecutiveCrashes = 0
  private laterTimer: NodeJS.Timeout | null = null

  constructor(
    private readonly options: Pick<ShardOptions, 'index' | 'coalesceWindowMs' | 'log'>,
    private readonly swap: (reason: RestartReason) => Promise<void>,
    private readonly stopping: () => boolean,
  ) {}

  /** A swap is asked for or running: what the shard serves is about to change. */
  get busy(): boolean {
    return this.pending !== null || this.driving
  }

  /** Asks for a swap that picks up the current scripts; resolves when such a swap finished. */
  request(reason: RestartReason): Promise<void> {
    if (this.stopping()) return Promise.reject(new Error(`shard ${this.options.index} is stopping`))
    if (!this.pending) {
      this.pending = waiter()
      this.pendingReason = reason
    }
    const restarted = this.pending.promise
    void this.drive()
    return restarted
  }

  /**
   * Asks for a swap `delayMs` from now (0: never) if `wanted()` still holds then and no swap is asked
   * for or running; a later call moves the time (the last of a burst of deploys counts).
   */
  requestLater(reason: RestartReason, delayMs: number, wanted: () => boolean): void {
    if (this.laterTimer) clearTimeout(this.laterTimer)
    if (delayMs === 0) return
    this.laterTimer = setTimeout(() => {
      this.laterTimer = null
      if (!this.stopping() && !this.busy && wanted()) void this.request(reason).catch(() => {}) // a failed swap is retried as a crash
    }, delayMs).unref()
  }

  /** How long to wait before restarting after another crash in a row. */
  nextCrashBackoff(): number {
    this.consecutiveCrashes++
    return Math.min(CRASH_BACKOFF_MS.max, CRASH_BACKOFF_MS.first * 2 ** (this.consecutiveCrashes - 1))
  }

  /** The process ran long enough: the next crash starts the backoff over. */
  resetCrashBackoff(): void {
    this.consecutiveCrashes = 0
  }

  private async drive(): Promise<void> {
    if (this.driving) return
    this.driving = true
    try {
      while (this.pending && !this.stopping()) {
        if (this.pendingReason !== 'runaway') await sleep(this.options.coalesceWindowMs)
        const batch = this.pending
        const reason = this.pendingReason
        this.pending = null
        try {
          this.current = this.swap(reason)
          await this.current
          batch.resolve()
        } catch (error) {
          batch.reject(error)
          if (this.stopping()) break
          this.options.log.error({shard: this.options.index, err: error}, 'shard start failed; retrying')
          this.pending ??= waiter()
          this.pendingReason = 'crash'
          await sleep(this.nextCrashBackoff())
        }
      }
    } finally {
      this.driving = false
    }
  }
}
