// The gate in front of a shard: requests pass while its process serves (`up`) and wait at the gate
// in every other state — starting, swapping in `hold` mode, down after a crash — until it opens again.
import {type Waiter, waiter} from '../../util/waiter.js'
import type {ShardState} from './shard-types.js'

export class ShardGate {
  private current: ShardState = 'stopped'
  /** Closed (a pending waiter) whenever the state is not `up`, null while it is. */
  private closed: Waiter<void> | null = waiter()

  constructor(private readonly onChange?: (state: ShardState) => void) {}

  get state(): ShardState {
    return this.current
  }

  get open(): boolean {
    return this.current === 'up'
  }

  set(state: ShardState): void {
    if (state === 'up') {
      this.closed?.resolve()
      this.closed = null
    } else {
      this.closed ??= waiter()
    }
    if (this.current === state) return
    this.current = state
    this.onChange?.(state)
  }

  /** Wakes every waiting request (the shard is stopping: they see it and give up). */
  wakeAll(): void {
    this.closed?.resolve()
  }

  /** Resolves true once the gate is open, false after `timeoutMs` or once `giveUp()` holds. */
  async passed(timeoutMs: number, giveUp: () => boolean): Promise<boolean> {
    if (this.open) return true
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs)
    })
    // The gate may close again between opening and this continuation: loop until it is open.
    while (!this.open && !giveUp()) {
      if ((await Promise.race([this.closed!.promise, timedOut])) === 'timeout') break
    }
    clearTimeout(timer)
    return this.open
  }
}

/** Requests inside a shard's processes, and who waits for none to be. */
export class InFlight {
  count = 0
  private waiters: Array<() => void> = []

  enter(): void {
    this.count++
  }

  leave(): void {
    this.count--
    if (this.count === 0) for (const resolve of this.waiters.splice(0)) resolve()
  }

  /** Resolves when no request is inside, or after `timeoutMs` (then `onTimeout` is told how many still are). */
  drained(timeoutMs: number, onTimeout: (inFlight: number) => void): Promise<void> {
    if (this.count === 0) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        onTimeout(this.count)
        resolve()
      }, timeoutMs)
      this.waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
}
