// Gradual deployments on the host: the second release a script serves beside its current one (the
// `scripts` row keeps that), with its own modules (blobs shared by content) and its share of the
// requests. An upload carrying a split keeps the release it names — the script's current one, moved
// here, or the one kept here already — and one without a split drops it: one fenced transaction,
// the upload's. The data plane asks ../http/version-split.ts which of the two serves a request.
import type {Binding, ModuleInfo, ReleaseSplit} from '../../protocol/management-api.js'
import type {RunnableScript} from '../../workerd/script.js'
import {HostError} from '../errors.js'
import type {HostDatabase} from './database.js'
import type {FencedTx} from './fences.js'

/** workerd's name for a script's split release: no script name matches it, so no request reaches it but through the split. */
export function splitServiceName(script: string): string {
  return `${script}@split`
}

/** The script a workerd service name serves (a split release's name, or the script's own). */
export function scriptOfService(service: string): {script: string; split: boolean} {
  const split = service.endsWith('@split')
  return {script: split ? service.slice(0, -'@split'.length) : service, split}
}

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

/** Bindings whose data lives in the script's own Durable Object storage, which one release at a time may open. */
const ONE_RELEASE_BINDINGS: ReadonlySet<Binding['type']> = new Set(['durable_object_namespace', 'kv_namespace', 'd1_database', 'r2_bucket', 'queue'])

export class ScriptSplits {
  constructor(private readonly db: HostDatabase) {}

  get(script: string): SplitRecord | null {
    const row = this.db.one<SplitRow>('SELECT * FROM script_splits WHERE script = ?', script)
    return row ? splitFromRow(row) : null
  }

  modulesOf(script: string): ModuleInfo[] {
    return this.db.all<ModuleInfo>('SELECT name, type, sha256, size FROM split_modules WHERE script = ? ORDER BY position', script)
  }

  /** The split release as workerd runs it: the script's own values, under splitServiceName; crons and queues stay with the current release. */
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
  keep(tx: FencedTx, script: string, split: ReleaseSplit | null, upload: {bindings: Binding[]; hasAssets: boolean}): void {
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
    const bindings = [...upload.bindings, ...(this.get(script)?.bindings ?? [])]
    const stateful = bindings.find((binding) => ONE_RELEASE_BINDINGS.has(binding.type))
    if (stateful || upload.hasAssets) {
      // Cloudflare's rule for Durable Objects; here also for what the host keeps in them, and for assets (served from one release).
      throw new HostError('invalid_request', `a script with ${stateful ? `a ${stateful.type} binding` : 'static assets'} serves one release: no split`)
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
