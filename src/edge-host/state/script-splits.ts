// Gradual deployments on the host: the second release a script serves beside its current one (the
// `scripts` row keeps that), with its own modules (blobs shared by content) and its share of the
// requests. An upload carrying a split keeps the release it names — the script's current one, moved
// here, or the one kept here already — and one without a split drops it: one fenced transaction,
// the upload's. The data plane asks ../http/version-split.ts which of the two serves a request, and
// answers its static assets from that release's (./release-assets.ts keeps both).
import type {Binding, ModuleInfo, ReleaseSplit} from '../../protocol/management-api.js'
import {type RunnableScript, splitServiceName} from '../../workerd/script.js'
import {HostError} from '../errors.js'
import type {HostDatabase} from './database.js'
import type {FencedTx} from './fences.js'

export interface SplitRecord extends ReleaseSplit {
  mainModule: string
  compatibilityDate: string
  compatibilityFlags: string[]
  bindings: Binding[]
}

interface SplitRow {
  release_generation: string
  main_module: string
  compatibility_date: string
  compatibility_flags: string
  bindings: string
  version_ids: string
  percentage: number
}

export class ScriptSplits {
  constructor(private readonly db: HostDatabase) {}

  get(script: string): SplitRecord | null {
    const row = this.db.one<SplitRow>('SELECT * FROM script_splits WHERE script = ?', script)
    return row ? splitFromRow(row) : null
  }

  modulesOf(script: string): ModuleInfo[] {
    return this.db.all<ModuleInfo>('SELECT name, type, sha256, size FROM split_modules WHERE script = ? ORDER BY position', script)
  }

  /**
   * The split release as workerd runs it: the script's own values, under splitServiceName; its
   * storage bindings reach the Worker's data (../../workerd/config.ts workersOf); cron triggers and
   * queue consumers are the Worker's, run by the current release.
   */
  runnable(primary: RunnableScript): RunnableScript | null {
    const split = this.get(primary.name)
    if (!split) return null
    return {
      ...primary,
      name: splitServiceName(primary.name),
      releaseGeneration: split.releaseGeneration,
      mainModule: split.mainModule,
      compatibilityDate: split.compatibilityDate,
      compatibilityFlags: split.compatibilityFlags,
      modules: this.modulesOf(primary.name),
      bindings: split.bindings,
      crons: [],
      queueConsumers: [],
    }
  }

  /**
   * Before an upload replaces the script's current release: keeps the release `split` names (the
   * current one is copied here; the one kept here already stays) or, without a split, drops it.
   */
  keep(tx: FencedTx, script: string, split: ReleaseSplit | null, upload: {bindings: Binding[]}): void {
    if (split === null) {
      this.drop(tx, script)
      return
    }
    const current = this.db.one<{
      release_generation: string | null
      main_module: string
      compatibility_date: string
      compatibility_flags: string
      bindings: string
    }>('SELECT release_generation, main_module, compatibility_date, compatibility_flags, bindings FROM scripts WHERE name = ?', script)
    const kept = this.get(script)
    if (current?.release_generation === split.releaseGeneration) {
      this.drop(tx, script)
      tx.run(
        `INSERT INTO script_splits (script, release_generation, main_module, compatibility_date, compatibility_flags, bindings, version_ids, percentage)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        script,
        split.releaseGeneration,
        current.main_module,
        current.compatibility_date,
        current.compatibility_flags,
        current.bindings,
        JSON.stringify(split.versionIds),
        split.percentage,
      )
      tx.run('INSERT INTO split_modules SELECT script, position, name, type, sha256, size FROM script_modules WHERE script = ?', script)
    } else if (kept?.releaseGeneration === split.releaseGeneration) {
      tx.run('UPDATE script_splits SET version_ids = ?, percentage = ? WHERE script = ?', JSON.stringify(split.versionIds), split.percentage, script)
    } else {
      throw new HostError('split_release_missing', `script ${script} holds no release ${split.releaseGeneration} to keep beside the upload`)
    }
    // Durable Objects keep one release: their classes' storage is one release's (../../engine/versions/deployment-spec.ts
    // says why). KV, D1, R2 and queues are the Worker's, which both releases reach (../../workerd/config.ts workersOf).
    if ([...upload.bindings, ...(this.get(script)?.bindings ?? [])].some((binding) => binding.type === 'durable_object_namespace')) {
      throw new HostError('invalid_request', 'a script with a durable_object_namespace binding serves one release: no split')
    }
  }

  private drop(tx: FencedTx, script: string): void {
    const digests = this.modulesOf(script).map((module) => module.sha256)
    tx.run('DELETE FROM split_modules WHERE script = ?', script)
    tx.run('DELETE FROM script_splits WHERE script = ?', script)
    for (const digest of new Set(digests)) dropUnusedBlob(tx, digest)
  }
}

/** Blobs are shared by content: one no release of any script names any more goes. */
export function dropUnusedBlob(tx: FencedTx, digest: string): void {
  tx.run(
    `DELETE FROM module_blobs WHERE sha256 = ?
       AND NOT EXISTS (SELECT 1 FROM script_modules WHERE sha256 = ?) AND NOT EXISTS (SELECT 1 FROM split_modules WHERE sha256 = ?)`,
    digest,
    digest,
    digest,
  )
}

function splitFromRow(row: SplitRow): SplitRecord {
  return {
    releaseGeneration: row.release_generation,
    versionIds: JSON.parse(row.version_ids),
    percentage: row.percentage,
    mainModule: row.main_module,
    compatibilityDate: row.compatibility_date,
    compatibilityFlags: JSON.parse(row.compatibility_flags),
    bindings: JSON.parse(row.bindings),
  }
}
