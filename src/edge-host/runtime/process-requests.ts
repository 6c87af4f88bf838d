// What the host knows of the requests inside one running workerd process (see ./shard.ts): which
// are inside and since when (to blame a stall, a crash or a memory runaway on a script), how many
// answers it gave (the watchdog's sign of progress), and whether it was replaced as a runaway.
import {setTimeout as sleep} from 'node:timers/promises'

/** A request inside the process. */
interface Inside {
  script: string
  startedAt: number
  /** Gives the request up (see condemn); set once it is on its way to the process. */
  abandon?: () => void
}

/** How long a failed request stays a suspect if its process does not exit. */
const FAILED_SUSPECT_MS = 5_000

export class ProcessRequests {
  private readonly inside = new Set<Inside>()
  /** Script → when it last answered: a script that answered after a request of it entered was not held by that request. */
  private readonly lastAnswer = new Map<string, number>()
  /** Answers the process gave: requests it finished, probes it answered. */
  answered = 0
  /** The script blamed when the process was replaced as a runaway; null while it was not. */
  runawayBlamed: string | null = null
  /** WebSockets spliced to the process (they hold no lease; a swap closes them). */
  openTunnels = 0

  constructor(private readonly exited: Promise<unknown>) {}

  /**
   * A request of `script` enters: `left` says how it ended; `abandonable` names how to give it up
   * should the process be condemned while it is inside.
   */
  enter(script: string): {left: (failed: boolean) => void; abandonable: (abandon: () => void) => void} {
    const entry: Inside = {script, startedAt: Date.now()}
    this.inside.add(entry)
    const abandonable = (abandon: () => void) => {
      entry.abandon = abandon
    }
    const left = (failed: boolean) => {
      entry.abandon = undefined
      // A failed request may be what is killing the process: keep it as a suspect until the
      // process has exited (its crash is blamed first) or has evidently survived it.
      if (!failed) {
        this.inside.delete(entry)
        this.answered++
        this.lastAnswer.set(script, Date.now())
      } else void Promise.race([this.exited, sleep(FAILED_SUSPECT_MS)]).then(() => this.inside.delete(entry))
    }
    return {left, abandonable}
  }

  /**
   * The process was stopped as a runaway `blamed` caused (null: none to blame). The requests of
   * other scripts inside are given up at once rather than when it dies (a dying process takes
   * hundreds of ms to close its sockets on a busy machine, more the more memory it has to free),
   * so they are replayed on its replacement without waiting for it.
   */
  condemn(blamed: string | null): void {
    this.runawayBlamed = blamed
    if (blamed === null) return
    for (const entry of this.inside) if (entry.script !== blamed) entry.abandon?.()
  }

  /**
   * The script of the oldest request inside (or failed in it) that has run at least `minAgeMs`, or
   * null. A neighbour's request that reached the process just before the thread was held is stuck
   * behind the offender, and may be older. So, oldest first within each rank: a request whose script
   * has never answered in this process; then one whose script has not answered since it entered;
   * last, one whose script answered after it entered (evidently not held by it).
   */
  suspect(minAgeMs: number): string | null {
    const now = Date.now()
    let best: {entry: Inside; rank: number} | null = null
    for (const entry of this.inside) {
      if (now - entry.startedAt < minAgeMs) continue
      const lastAnswer = this.lastAnswer.get(entry.script)
      const rank = lastAnswer === undefined ? 0 : lastAnswer > entry.startedAt ? 2 : 1
      if (!best || rank < best.rank || (rank === best.rank && entry.startedAt < best.entry.startedAt)) best = {entry, rank}
    }
    return best?.entry.script ?? null
  }

  /** A WebSocket to the process is spliced; the returned function says it closed (more than once is harmless). */
  tunnelOpened(): () => void {
    this.openTunnels++
    let open = true
    return () => {
      if (open) this.openTunnels--
      open = false
    }
  }

  /** A request of `script` that failed in the process may be sent again: a runaway another script caused killed it. */
  replayable(script: string): boolean {
    return this.runawayBlamed !== null && this.runawayBlamed !== script
  }
}
