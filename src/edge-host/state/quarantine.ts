// Runaway incidents per script, counted for its current release only (a deploy starts over), and
// the quarantine they lead to (see ../runtime/watchdog.ts). Incidents are recorded during a fence
// too: the watchdog's verdict is not a change of what the kit deployed.
import type {HostDatabase} from './database.js'

/** SQL: the script `s` is quarantined (joined with its `q` row): for its current release only. */
export const QUARANTINED = '(q.quarantined_at IS NOT NULL AND q.release_generation = s.release_generation)'

export interface QuarantineRecord {
  script: string
  releaseGeneration: string
  incidents: number
  lastIncident: string
  quarantinedAt: number
}

export class Quarantine {
  constructor(private readonly db: HostDatabase) {}

  /**
   * Counts an incident against the script's current release; at `quarantineAfter` incidents that
   * release is quarantined. Returns the count and whether this incident quarantined it.
   */
  recordIncident(script: string, kind: string, quarantineAfter: number): {incidents: number; quarantined: boolean} {
    return this.db.write((tx) => {
      const current = this.db.one<{release_generation: string | null}>('SELECT release_generation FROM scripts WHERE name = ?', script)
      if (!current?.release_generation) return {incidents: 0, quarantined: false}
      const prior = this.db.one<{release_generation: string; incidents: number; quarantined_at: number | null}>(
        'SELECT release_generation, incidents, quarantined_at FROM worker_quarantine WHERE script = ?',
        script,
      )
      const sameRelease = prior?.release_generation === current.release_generation
      if (sameRelease && prior.quarantined_at !== null) return {incidents: prior.incidents, quarantined: false}
      const incidents = (sameRelease ? prior.incidents : 0) + 1
      const quarantined = incidents >= quarantineAfter
      tx.upsert('worker_quarantine', ['script'], {
        script,
        release_generation: current.release_generation,
        incidents,
        last_incident: kind,
        quarantined_at: quarantined ? Date.now() : null,
      })
      return {incidents, quarantined}
    })
  }

  /** Scripts whose current release is quarantined, with the incident that tipped it. */
  scripts(): QuarantineRecord[] {
    return this.db.all<QuarantineRecord>(
      `SELECT q.script, q.release_generation AS releaseGeneration, q.incidents, q.last_incident AS lastIncident, q.quarantined_at AS quarantinedAt
       FROM worker_quarantine q JOIN scripts s ON s.name = q.script WHERE ${QUARANTINED} ORDER BY q.script`,
    )
  }
}
