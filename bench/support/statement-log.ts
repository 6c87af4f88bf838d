// The server's own time per statement kind, read from an embedded PostgreSQL started with
// `log_min_duration_statement=0` (every statement logged with its duration). Pass `onLog` to
// postgresServer; `start()` begins a count, `stop()` ends it and returns it, slowest kind first.
import {setTimeout as sleep} from 'node:timers/promises'

export interface StatementTime {
  kind: string
  count: number
  ms: number
}

export class StatementLog {
  /** The server flag that makes it log every statement with its duration. */
  static readonly FLAG = 'log_min_duration_statement=0'
  private counting: Map<string, StatementTime> | null = null
  /** A logged duration whose statement text starts on the next log line (the kit's SQL templates begin with a newline). */
  private pending: number | null = null

  readonly onLog = (chunk: string): void => {
    if (!this.counting) return
    for (const line of chunk.split('\n')) {
      const logged = /duration: ([\d.]+) ms\s+(?:statement|execute [^:]*):\s*(.*)$/i.exec(line)
      if (logged) {
        const text = logged[2]!.trim()
        if (text) this.record(text, Number(logged[1]))
        this.pending = text ? null : Number(logged[1])
      } else if (this.pending !== null && line.trim()) {
        this.record(line.trim(), this.pending)
        this.pending = null
      }
    }
  }

  start(): void {
    this.counting = new Map()
  }

  /** Ends the count once the server's last lines arrived (it logs a statement after it ran). */
  async stop(): Promise<StatementTime[]> {
    await sleep(500)
    const counted = [...(this.counting ?? new Map<string, StatementTime>()).values()]
    this.counting = null
    return counted.sort((a, b) => b.ms - a.ms)
  }

  /** Kinds: the verb and table, and for a read the table it starts from. */
  private record(text: string, ms: number): void {
    const words = text.toLowerCase().replaceAll('"', '').split(/\s+/)
    const kind = words[0] === 'select' ? `select … from ${words[words.indexOf('from') + 1] ?? '?'}` : words.slice(0, 4).join(' ')
    const entry = this.counting!.get(kind) ?? {kind, count: 0, ms: 0}
    entry.count++
    entry.ms += ms
    this.counting!.set(kind, entry)
  }
}
