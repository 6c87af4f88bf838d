// Scripts and their releases: metadata, modules (blobs shared by content), shard assignment,
// lockdown and retirement, and the route the data plane reads for every request.
import {sha256Hex} from '../../canonical-json.js'
import type {Binding, ModuleInfo, ModuleType, QueueConsumer, ReleaseAssets, ReleaseSplit, ScriptState} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
import type {ControlConfig, PolicyColumns} from './control-config.js'
import {type AccessPolicyRecord, POLICY_COLUMNS, policyFromRow} from './control-config.js'
import type {Credentials} from './credentials.js'
import type {HostDatabase} from './database.js'
import type {FencedTx} from './fences.js'
import {HANDED_OVER} from './handovers.js'
import {QUARANTINED} from './quarantine.js'
import {dropUnusedBlob, ScriptSplits} from './script-splits.js'
import {leastLoadedShard} from './shard-placement.js'
import {uploadDigest} from './upload-digest.js'
import type {RunnableScript} from '../../workerd/script.js'

export interface ScriptRecord {
  name: string
  shard: number | null
  releaseGeneration: string | null
  mainModule: string | null
  compatibilityDate: string | null
  compatibilityFlags: string[]
  builderPolicy: string | null
  tags: string[]
  bindings: Binding[]
  crons: string[]
  queueConsumers: QueueConsumer[]
  /** The kit's ids of the version the release is. */
  versionIds: string[]
  lockedDownAt: number | null
  retiredAt: number | null
  createdAt: number
  updatedAt: number
  policy: AccessPolicyRecord
}

export interface RouteRecord {
  shard: number | null
  retired: boolean
  lockedDown: boolean
  /** Its current release caused too many incidents; refused until the next deploy. */
  quarantined: boolean
  /** Moved to another host of the kit (./handovers.ts): not run here. */
  handedOver: boolean
  policy: AccessPolicyRecord
  /** The department the current release was uploaded for (metrics label), if the upload named one. */
  department: string | null
  /** The kit's ids of the version the current release is. */
  versionIds: string[]
  /** A gradual deployment: the release served beside the current one (../http/version-split.ts chooses). */
  split: ReleaseSplit | null
}

export function scriptStateOf(script: Pick<ScriptRecord, 'retiredAt' | 'lockedDownAt'>): ScriptState {
  return script.retiredAt !== null ? 'retired' : script.lockedDownAt !== null ? 'locked_down' : 'active'
}

export interface DecodedModule {
  name: string
  type: ModuleType
  content: Buffer
}

export interface ScriptUpload {
  releaseGeneration: string
  mainModule: string
  compatibilityDate: string
  compatibilityFlags: string[]
  builderPolicy: string
  tags: string[]
  department: string | null
  modules: DecodedModule[]
  bindings: Binding[]
  crons: string[]
  queueConsumers: QueueConsumer[]
  /** The release's static assets (../state/release-assets.ts stores them), or null. */
  assets: ReleaseAssets | null
  versionIds: string[]
  /** The release kept serving beside this one (./script-splits.ts), or null. */
  split: ReleaseSplit | null
}

/** The columns of `scripts` a ScriptRecord is read from. */
interface ScriptRow extends PolicyColumns {
  name: string
  shard: number | null
  release_generation: string | null
  main_module: string | null
  compatibility_date: string | null
  compatibility_flags: string
  builder_policy: string | null
  tags: string
  bindings: string
  crons: string
  queue_consumers: string
  version_ids: string
  locked_down_at: number | null
  retired_at: number | null
  created_at: number
  updated_at: number
}

interface RouteRow extends PolicyColumns {
  shard: number | null
  department: string | null
  version_ids: string
  split_generation: string | null
  split_version_ids: string | null
  split_percentage: number | null
  retired_at: number | null
  locked_down_at: number | null
  quarantined: 0 | 1
  handed_over: 0 | 1
}

export class Scripts {
  /** Routes read by the data plane, kept until the next write (this process is the only writer of scripts). */
  private readonly routes = new Map<string, RouteRecord | null>()
  readonly splits: ScriptSplits

  constructor(
    private readonly db: HostDatabase,
    private readonly credentials: Credentials,
    private readonly controlConfig: ControlConfig,
  ) {
    db.onWrite(() => this.routes.clear())
    this.splits = new ScriptSplits(db)
  }

  // ── Reads ───────────────────────────────────────────────────────────────────────────────────

  get(name: string): ScriptRecord | null {
    const row = this.db.one<ScriptRow>('SELECT * FROM scripts WHERE name = ?', name)
    return row ? scriptFromRow(row) : null
  }

  all(): ScriptRecord[] {
    return this.db.all<ScriptRow>('SELECT * FROM scripts ORDER BY name').map(scriptFromRow)
  }

  /** One page of scripts sorted by name, starting after `afterName`. */
  page(afterName: string | null, limit: number): ScriptRecord[] {
    return this.db.all<ScriptRow>('SELECT * FROM scripts WHERE name > ? ORDER BY name LIMIT ?', afterName ?? '', limit).map(scriptFromRow)
  }

  /** What the data plane needs to route one request; read on every request. */
  route(name: string): RouteRecord | null {
    const cached = this.routes.get(name)
    if (cached !== undefined) return cached
    const row = this.db.one<RouteRow>(
      `SELECT shard, department, retired_at, locked_down_at, ${POLICY_COLUMNS}, ${QUARANTINED} AS quarantined, ${HANDED_OVER} AS handed_over, s.version_ids,
         p.release_generation AS split_generation, p.version_ids AS split_version_ids, p.percentage AS split_percentage
       FROM scripts s LEFT JOIN worker_quarantine q ON q.script = s.name LEFT JOIN script_splits p ON p.script = s.name
         LEFT JOIN script_handovers h ON h.script = s.name WHERE s.name = ?`,
      name,
    )
    const route = row
      ? {
          shard: row.shard,
          retired: row.retired_at !== null,
          lockedDown: row.locked_down_at !== null,
          quarantined: row.quarantined === 1,
          handedOver: row.handed_over === 1,
          policy: policyFromRow(row),
          department: row.department,
          versionIds: JSON.parse(row.version_ids),
          split:
            row.split_generation === null
              ? null
              : {releaseGeneration: row.split_generation, versionIds: JSON.parse(row.split_version_ids!), percentage: row.split_percentage!},
        }
      : null
    // Unknown names are not cached: anyone can ask for any number of them.
    if (route) this.routes.set(name, route)
    return route
  }

  modulesOf(name: string): ModuleInfo[] {
    return this.db.all<ModuleInfo>('SELECT name, type, sha256, size FROM script_modules WHERE script = ? ORDER BY position', name)
  }

  moduleContent(sha256: string): Buffer {
    const row = this.db.one<{content: Buffer}>('SELECT content FROM module_blobs WHERE sha256 = ?', sha256)
    if (!row) throw new Error(`module blob ${sha256} is missing from the host state`)
    return row.content
  }

  /** The scripts a shard must run: assigned to it, not retired, not quarantined, not handed over to another host. */
  runnableScripts(shard: number): RunnableScript[] {
    const rows = this.db.all<ScriptRow>(
      `SELECT s.* FROM scripts s LEFT JOIN worker_quarantine q ON q.script = s.name LEFT JOIN script_handovers h ON h.script = s.name
       WHERE s.shard = ? AND s.retired_at IS NULL AND NOT ${QUARANTINED} AND NOT ${HANDED_OVER} ORDER BY s.name`,
      shard,
    )
    return rows.flatMap((row) => {
      const runnable = this.runnable(scriptFromRow(row))
      const split = this.splits.runnable(runnable)
      return split ? [runnable, split] : [runnable]
    })
  }

  runnable(script: ScriptRecord): RunnableScript {
    if (script.releaseGeneration === null || script.mainModule === null || script.compatibilityDate === null) {
      throw new Error(`script ${script.name} has no uploaded release`)
    }
    return {
      name: script.name,
      releaseGeneration: script.releaseGeneration,
      mainModule: script.mainModule,
      compatibilityDate: script.compatibilityDate,
      compatibilityFlags: script.compatibilityFlags,
      modules: this.modulesOf(script.name),
      bindings: script.bindings,
      crons: script.crons,
      queueConsumers: script.queueConsumers,
      secrets: this.credentials.secretValuesByName(script.name),
      serviceAccounts: this.credentials.serviceAccountLogins(script.name),
      runtimeConfig: this.controlConfig.runtimeConfig(script.name).map((entry) => ({key: entry.key, valueJson: entry.valueJson})),
      operationSettingsJson: this.controlConfig.operationSettings(script.name).settingsJson,
    }
  }

  /** True when the script already holds exactly this upload (a retried upload). */
  holdsUpload(name: string, upload: ScriptUpload): boolean {
    const row = this.db.one<{content_digest: string | null}>('SELECT content_digest FROM scripts WHERE name = ? AND retired_at IS NULL', name)
    return row?.content_digest === uploadDigest(upload)
  }

  /** Refuses a mutation of a retired script (terminal for the kit). */
  assertNotRetired(name: string): void {
    if (this.get(name)?.retiredAt != null) throw new HostError('edge_host_script_retired', `script ${name} is retired`)
  }

  // ── Writes ──────────────────────────────────────────────────────────────────────────────────

  /**
   * Stores an upload, assigning a shard on the first one (and on the first after it was moved to
   * one of its own: a new release starts over on the shared shards). Returns the shard to restart,
   * or null when the upload repeats what the script already holds.
   */
  save(tx: FencedTx, name: string, upload: ScriptUpload, shards: {count: number; maxScriptsPerShard: number}): number | null {
    this.assertNotRetired(name)
    if (this.holdsUpload(name, upload)) return null
    this.credentials.assertNoSecretShadowed(name, upload.bindings)
    // Before the current release is replaced: a split may keep it.
    this.splits.keep(tx, name, upload.split, {bindings: upload.bindings})
    let shard = this.get(name)?.shard ?? null
    if (shard === null || shard >= shards.count) {
      shard = leastLoadedShard(this.shardLoads(shards.count), shards.count, shards.maxScriptsPerShard)
      if (shard === null) {
        throw new HostError('host_full', `every shard holds ${shards.maxScriptsPerShard} scripts; raise host.shards or host.max_scripts_per_shard`)
      }
    }
    tx.upsert(
      'scripts',
      ['name'],
      {
        name,
        shard,
        release_generation: upload.releaseGeneration,
        main_module: upload.mainModule,
        compatibility_date: upload.compatibilityDate,
        compatibility_flags: JSON.stringify(upload.compatibilityFlags),
        builder_policy: upload.builderPolicy,
        tags: JSON.stringify(upload.tags),
        department: upload.department,
        bindings: JSON.stringify(upload.bindings),
        crons: JSON.stringify(upload.crons),
        queue_consumers: JSON.stringify(upload.queueConsumers),
        version_ids: JSON.stringify(upload.versionIds),
        content_digest: uploadDigest(upload),
        created_at: tx.now,
        updated_at: tx.now,
        policy_updated_at: tx.now,
      },
      ['created_at', 'policy_updated_at'],
    )
    this.replaceModules(tx, name, upload.modules)
    return shard
  }

  /** Retires a script for good; a name the host never had is recorded as retired too. */
  retire(tx: FencedTx, name: string): void {
    tx.run(
      `INSERT INTO scripts (name, retired_at, created_at, updated_at, policy_updated_at) VALUES (@name, @now, @now, @now, @now)
       ON CONFLICT (name) DO UPDATE SET retired_at = COALESCE(retired_at, excluded.retired_at),
         updated_at = CASE WHEN retired_at IS NULL THEN excluded.updated_at ELSE updated_at END`,
      {name, now: tx.now},
    )
  }

  /** Returns when the script was locked down (the first lockdown's time). */
  lockDown(tx: FencedTx, name: string): number {
    tx.run('UPDATE scripts SET locked_down_at = COALESCE(locked_down_at, ?), updated_at = ? WHERE name = ?', tx.now, tx.now, name)
    return this.get(name)!.lockedDownAt!
  }

  /**
   * At start: scripts on shards at or past `shardCount` are either on a shard of their own (their
   * current release caused an incident, see isolate) — numbered again from `shardCount`, at most
   * `maxIsolated` of them — or were on shards that no longer exist (the count was lowered) and move
   * to the least-loaded shard. Returns the indices of the own shards.
   */
  placeAtStart(shardCount: number, maxIsolated: number): number[] {
    return this.db.write((tx) => {
      const beyond = this.db.all<{name: string; incidents: number}>(
        `SELECT s.name, CASE WHEN q.release_generation = s.release_generation THEN q.incidents ELSE 0 END AS incidents
         FROM scripts s LEFT JOIN worker_quarantine q ON q.script = s.name
         WHERE s.retired_at IS NULL AND s.shard >= ? ORDER BY s.shard, s.name`,
        shardCount,
      )
      const own: number[] = []
      for (const {name, incidents} of beyond) {
        const shard =
          incidents > 0 && own.length < maxIsolated
            ? shardCount + own.length
            : leastLoadedShard(this.shardLoads(shardCount), shardCount, Number.POSITIVE_INFINITY)!
        if (shard >= shardCount) own.push(shard)
        tx.run('UPDATE scripts SET shard = ? WHERE name = ?', shard, name)
      }
      return own
    })
  }

  /**
   * Moves a script that caused an incident to a shard of its own, so it cannot stall or crash its
   * neighbours again: the lowest index from `shardCount` up that no live script holds. Null when
   * it has one already, or `maxIsolated` are taken (it stays where it is). A new release of it goes
   * back to the shared shards (see save).
   */
  isolate(name: string, shardCount: number, maxIsolated: number): number | null {
    return this.db.write((tx) => {
      const shard = this.get(name)?.shard ?? null
      if (shard === null || shard >= shardCount) return null
      const taken = new Set(
        this.db.all<{shard: number}>('SELECT shard FROM scripts WHERE retired_at IS NULL AND shard >= ?', shardCount).map((row) => row.shard),
      )
      if (taken.size >= maxIsolated) return null
      let own = shardCount
      while (taken.has(own)) own++
      tx.run('UPDATE scripts SET shard = ? WHERE name = ?', own, name)
      return own
    })
  }

  /** Non-retired scripts per shard, for shards below `shardCount`. */
  private shardLoads(shardCount: number): Map<number, number> {
    const rows = this.db.all<{shard: number; count: number}>(
      'SELECT shard, COUNT(*) AS count FROM scripts WHERE retired_at IS NULL AND shard < ? GROUP BY shard',
      shardCount,
    )
    return new Map(rows.map((row) => [row.shard, row.count]))
  }

  private replaceModules(tx: FencedTx, name: string, modules: DecodedModule[]): void {
    const previous = new Set(this.modulesOf(name).map((module) => module.sha256))
    tx.run('DELETE FROM script_modules WHERE script = ?', name)
    modules.forEach((module, position) => {
      const digest = sha256Hex(module.content)
      tx.run('INSERT OR IGNORE INTO module_blobs (sha256, content) VALUES (?, ?)', digest, module.content)
      tx.run(
        'INSERT INTO script_modules (script, position, name, type, sha256, size) VALUES (?, ?, ?, ?, ?, ?)',
        name,
        position,
        module.name,
        module.type,
        digest,
        module.content.length,
      )
    })
    for (const digest of previous) dropUnusedBlob(tx, digest)
  }
}

function scriptFromRow(row: ScriptRow): ScriptRecord {
  return {
    name: row.name,
    shard: row.shard,
    releaseGeneration: row.release_generation,
    mainModule: row.main_module,
    compatibilityDate: row.compatibility_date,
    compatibilityFlags: JSON.parse(row.compatibility_flags),
    builderPolicy: row.builder_policy,
    tags: JSON.parse(row.tags),
    bindings: JSON.parse(row.bindings),
    crons: JSON.parse(row.crons),
    queueConsumers: JSON.parse(row.queue_consumers),
    versionIds: JSON.parse(row.version_ids),
    lockedDownAt: row.locked_down_at,
    retiredAt: row.retired_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    policy: policyFromRow(row),
  }
}
