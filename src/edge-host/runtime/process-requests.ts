// What the host knows of the requests inside one running workerd process (see ./shard.ts): which
// are inside and since when (to blame a stall, a crash or a memory runaway on a script), how many
// answers it gave (the watchdog's sign of progress), and whether it was replaced as a runaway.
import {setTimeout as sleep} from 'node:timers/promises'

/** A request inside the process. */
interface Inside {
  script: string
  startedAt: number
}

/** How long a failed request stays a suspect if its process does not exit. */
const FAILED_SUSPECT_MS = 5_000

export class ProcessRequests {
  private readonly inside = new Set<Inside>()
  /** Answers the process gave: requests it finished, probes it answered. */
  answered = 0
  /** The script blamed when the process was replaced as a runaway; null while it was not. */
  runawayBlamed: string | null = null

  constructor(private readonly exited: Promise<unknown>) {}

  /** A request of `script` enters; the returned function says how it ended. */
  enter(script: string): (failed: boolean) => void {
    const entry: Inside = {script, startedAt: Date.now()}
    this.inside.add(entry)
    return (failed) => {
      // A failed request may be what is killing the process: keep it as a suspect until the
      // process has exited (its crash is blamed first) or has evidently survived it.
      if (!failed) {
        this.inside.delete(entry)
        this.answered++
      } else void Promise.race([this.exited, sleep(FAILED_SUSPECT_MS)]).then(() => this.inside.delete(entry))
    }
  }

  /** The script of the oldest request inside (or failed in it) that has run at least `minAgeMs`, or null. */
  suspect(minAgeMs: number): string | null {
    const now = Date.now()
    let oldest: Inside | null = null
    for (const entry of this.inside) if (now - entry.startedAt >= minAgeMs && (!oldest || entry.startedAt < oldest.startedAt)) oldest = entry
    return oldest?.script ?? null
  }

  /** A request of `script` that failed in the process may be sent again: a runaway another script caused killed it. */
  replayable(script: string): boolean {
    return this.runawayBlamed !== null && this.runawayBlamed !== script
  }
}
