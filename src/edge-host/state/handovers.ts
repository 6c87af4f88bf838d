// Stateful Workers on the hosts of a kit (docs/many-hosts.md), host side: a script handed over to
// another host is not run here (no shard loads it, no cron fires, the data plane answers 503
// worker_moved), so its Durable Object data stays still while the kit copies it, and a host that
// is not a Worker's owner holds its releases and control state without ever writing its data. It
// runs here again once the kit imported its data here (the move that makes this host its owner).
import type {HostDatabase} from './database.js'

/** SQL: the script `s` (joined with its `h` row) is handed over and not taken back by an import. */
export const HANDED_OVER = '(h.handed_over_at IS NOT NULL AND h.imported_at IS NULL)'

export class Handovers {
  constructor(private readonly db: HostDatabase) {}

  /** Marks the script handed over; true when it was not already. Idempotent (keeps the first time). */
  handOver(script: string, now = Date.now()): boolean {
    return this.db.write((tx) => {
      const prior = this.db.one<{imported_at: number | null}>('SELECT imported_at FROM script_handovers WHERE script = ?', script)
      if (prior && prior.imported_at === null) return false
      tx.upsert('script_handovers', ['script'], {script, handed_over_at: now, imported_at: null})
      return true
    })
  }

  /** The script's data was imported here: it runs here again. */
  imported(script: string, now = Date.now()): void {
    this.db.write((tx) => tx.upsert('script_handovers', ['script'], {script, handed_over_at: now, imported_at: now}, ['handed_over_at']))
  }

  isHandedOver(script: string): boolean {
    return this.db.one<{n: number}>(`SELECT COUNT(*) AS n FROM script_handovers h WHERE h.script = ? AND ${HANDED_OVER}`, script)!.n > 0
  }

  wasImported(script: string): boolean {
    return this.db.one<{n: number}>('SELECT COUNT(*) AS n FROM script_handovers WHERE script = ? AND imported_at IS NOT NULL', script)!.n > 0
  }
}
