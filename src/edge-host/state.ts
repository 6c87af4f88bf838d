// Host state: one SQLite file (better-sqlite3, WAL, synchronous=FULL) in the data dir. Scripts with
// their modules and metadata, per-Worker control state (access policy, lockdown, secrets, service-
// account credentials, receipts), fences, pairing and the nonces of recently signed requests. The
// host process is the only writer except `host pairing-code --rotate`, which touches pairing rows.
//
// Every mutation runs in one transaction that first checks the fence, so a fence that begins while
// an upload is being validated still stops that upload from committing.
import {randomInt, timingSafeEqual} from 'node:crypto'
import path from 'node:path'
import Database from 'better-sqlite3'
import {canonicalDigest, canonicalJson} from '../canonical-json.js'
import type {AccessPolicyMode, Binding, ControlMeta, ModuleInfo, ModuleType, ReceiptOperation, ScriptState} from '../protocol/management-api.js'
import {sha256Hex} from '../canonical-json.js'
import {generateSecret, type NonceLedger} from '../protocol/signing.js'
import {ensurePrivateFile} from '../util/private-files.js'
import {HostError} from './errors.js'

export const STATE_FILE = 'host.sqlite'
const SCHEMA_VERSION = 2
/** How many lifted fences the host keeps for the kit's lost-fence confirmation. */
const FENCE_HISTORY = 100
const NONCE_PRUNE_INTERVAL_MS = 60_000

const SCHEMA = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE scripts (
  name TEXT PRIMARY KEY,
  shard INTEGER,
  release_generation TEXT,
  main_module TEXT,
  compatibility_date TEXT,
  compatibility_flags TEXT NOT NULL DEFAULT '[]',
  builder_policy TEXT,
  tags TEXT NOT NULL DEFAULT '[]',
  bindings TEXT NOT NULL DEFAULT '[]',
  content_digest TEXT,
  locked_down_at INTEGER,
  retired_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  policy_mode TEXT NOT NULL DEFAULT 'public',
  policy_api_key_sha256 TEXT,
  policy_api_key_last_four TEXT,
  policy_ip_allowlist TEXT NOT NULL DEFAULT '[]',
  policy_revision INTEGER NOT NULL DEFAULT 0,
  policy_updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE script_modules (
  script TEXT NOT NULL REFERENCES scripts(name),
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  size INTEGER NOT NULL,
  PRIMARY KEY (script, position)
) STRICT;
CREATE INDEX script_modules_by_sha256 ON script_modules (sha256);
CREATE TABLE module_blobs (sha256 TEXT PRIMARY KEY, content BLOB NOT NULL) STRICT;
CREATE TABLE secrets (
  script TEXT NOT NULL REFERENCES scripts(name),
  name TEXT NOT NULL,
  value TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (script, name)
) STRICT;
CREATE TABLE service_accounts (
  script TEXT NOT NULL REFERENCES scripts(name),
  id TEXT NOT NULL,
  username TEXT NOT NULL,
  password TEXT NOT NULL,
  password_sha256 TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (script, id)
) STRICT;
CREATE TABLE receipts (
  mutation_id TEXT PRIMARY KEY,
  command_digest TEXT NOT NULL,
  operation TEXT NOT NULL,
  script TEXT NOT NULL,
  result TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  acknowledged_at INTEGER
) STRICT;
CREATE TABLE fences (
  fence_id TEXT PRIMARY KEY,
  reason TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  lifted_at INTEGER,
  lift_reason TEXT
) STRICT;
CREATE INDEX fences_by_lifted_at ON fences (lifted_at);
CREATE TABLE nonces (nonce TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) STRICT, WITHOUT ROWID;
`

/** Version 2: runtime config and operation settings, each with its own revision per script. */
const UPGRADE_TO_2 = `
ALTER TABLE scripts ADD COLUMN runtime_config_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scripts ADD COLUMN runtime_config_updated_at INTEGER;
ALTER TABLE scripts ADD COLUMN operation_settings_json TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_sha256 TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_release TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scripts ADD COLUMN operation_settings_updated_at INTEGER;
CREATE TABLE runtime_config (
  script TEXT NOT NULL REFERENCES scripts(name),
  key TEXT NOT NULL,
  value_json TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (script, key)
) STRICT;
`

/**
 * Runaway incidents per script, counted for its current release only (a deploy starts over), and
 * the quarantine they lead to (see ./runtime/watchdog.ts). Created on open if missing: it came after
 * schema version 1 and needs nothing else to change.
 */
const QUARANTINE_SCHEMA = `
CREATE TABLE IF NOT EXISTS worker_quarantine (
  script TEXT PRIMARY KEY REFERENCES scripts(name),
  release_generation TEXT NOT NULL,
  incidents INTEGER NOT NULL,
  last_incident TEXT NOT NULL,
  quarantined_at INTEGER
) STRICT;
`

export interface AccessPolicyRecord {
  mode: AccessPolicyMode
  apiKeySha256: string | null
  apiKeyLastFour: string | null
  ipAllowlist: string[]
  revision: number
  updatedAt: number
}

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
  policy: AccessPolicyRecord
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
  modules: DecodedModule[]
  bindings: Binding[]
}

/** Everything the runtime needs to run one script; module bytes are fetched by digest. */
export interface RunnableScript {
  name: string
  releaseGeneration: string
  mainModule: string
  compatibilityDate: string
  compatibilityFlags: string[]
  modules: ModuleInfo[]
  bindings: Binding[]
  secrets: Array<{name: string; value: string}>
  serviceAccounts: Array<{id: string; username: string; password: string}>
  runtimeConfig: Array<{key: string; valueJson: string}>
  /** The operation settings document (JSON text), or null when none is stored. */
  operationSettingsJson: string | null
}

export interface RuntimeConfigRecord {
  key: string
  valueJson: string
  sha256: string
  updatedAt: number
}

export interface OperationSettingsRecord {
  settingsJson: string | null
  sha256: string | null
  releaseGeneration: string | null
  revision: number
  updatedAt: number
}

export interface FenceRecord {
  fenceId: string
  reason: string
  startedAt: number
  expiresAt: number
  liftedAt: number | null
  liftReason: 'ended' | 'expired' | null
}

export interface ReceiptRecord {
  mutationId: string
  commandDigest: string
  operation: ReceiptOperation
  scriptName: string
  result: Record<string, unknown>
  createdAt: number
  acknowledgedAt: number | null
}

type Row = Record<string, unknown>

/** SQL: the script `s` is quarantined (joined with its `q` row): for its current release only. */
const QUARANTINED = '(q.quarantined_at IS NOT NULL AND q.release_generation = s.release_generation)'

export class HostState {
  private readonly db: Database.Database
  private lastNoncePruneMs = 0

  private constructor(file: string) {
    this.db = new Database(file)
    this.db.pragma('journal_mode = WAL')
    this.db.pragma('synchronous = FULL')
    this.db.pragma('busy_timeout = 5000')
    this.db.pragma('foreign_keys = ON')
    const version = this.db.pragma('user_version', {simple: true}) as number
    if (version === 0 || version === 1) {
      // A data dir of the previous version is upgraded in place; its scripts keep serving.
      this.db
        .transaction(() => {
          if (version === 0) this.db.exec(SCHEMA)
          this.db.exec(UPGRADE_TO_2)
          this.db.pragma(`user_version = ${SCHEMA_VERSION}`)
        })
        .immediate()
    } else if (version !== SCHEMA_VERSION) {
      this.db.close()
      throw new Error(`${file} has host state schema ${version}; this build understands ${SCHEMA_VERSION}`)
    }
    this.db.exec(QUARANTINE_SCHEMA)
  }

  static open(dataDir: string): HostState {
    const file = path.join(dataDir, STATE_FILE)
    ensurePrivateFile(file) // pairing secret, Worker secrets, service-account passwords
    return new HostState(file)
  }

  close(): void {
    this.db.close()
  }

  private readonly statements = new Map<string, Database.Statement>()
  /** Routes read by the data plane, kept until the next write (this process is the only writer of scripts). */
  private readonly routes = new Map<string, RouteRecord | null>()

  /** Prepared statements are cached: the data plane reads a route on every request. */
  private sql(text: string): Database.Statement {
    let statement = this.statements.get(text)
    if (!statement) {
      statement = this.db.prepare(text)
      this.statements.set(text, statement)
    }
    return statement
  }

  /** Every write runs here: one IMMEDIATE transaction, and the route cache starts over after it. */
  private write<T>(work: () => T): T {
    try {
      return this.db.transaction(work).immediate()
    } finally {
      this.routes.clear()
    }
  }

  // ── Pairing ─────────────────────────────────────────────────────────────────────────────────

  private meta(key: string): string | null {
    const row = this.sql('SELECT value FROM meta WHERE key = ?').get(key) as {value: string} | undefined
    return row?.value ?? null
  }

  private setMeta(key: string, value: string | null): void {
    if (value === null) this.sql('DELETE FROM meta WHERE key = ?').run(key)
    else this.sql('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(key, value)
  }

  /** The unused pairing code, or null once it was used. */
  pairingCode(): string | null {
    return this.meta('pairing_code')
  }

  /** Issues a new one-time code, replacing any unused one. The current pairing stays valid. */
  issuePairingCode(): string {
    const code = newPairingCode()
    this.setMeta('pairing_code', code)
    return code
  }

  isPaired(): boolean {
    return this.meta('pairing_secret') !== null
  }

  pairingSecret(): string | null {
    return this.meta('pairing_secret')
  }

  /** Exchanges the one-time code for a fresh secret, replacing any earlier pairing. */
  completePairing(code: string): {secret: string; pairedAt: number} | null {
    return this.write(() => {
      const expected = this.pairingCode()
      if (expected === null || !sameText(expected, normalizePairingCode(code))) return null
      const secret = generateSecret()
      const pairedAt = Date.now()
      this.setMeta('pairing_code', null)
      this.setMeta('pairing_secret', secret)
      return {secret, pairedAt}
    })
  }

  // ── Nonces ──────────────────────────────────────────────────────────────────────────────────

  readonly nonces: NonceLedger = {
    remember: (nonce, expiresAtSeconds) => {
      const now = Date.now()
      if (now - this.lastNoncePruneMs > NONCE_PRUNE_INTERVAL_MS) {
        this.lastNoncePruneMs = now
        this.sql('DELETE FROM nonces WHERE expires_at < ?').run(Math.floor(now / 1000))
      }
      return this.sql('INSERT OR IGNORE INTO nonces (nonce, expires_at) VALUES (?, ?)').run(nonce, expiresAtSeconds).changes === 1
    },
  }

  // ── Scripts: reads ──────────────────────────────────────────────────────────────────────────

  script(name: string): ScriptRecord | null {
    const row = this.sql('SELECT * FROM scripts WHERE name = ?').get(name) as Row | undefined
    return row ? scriptFromRow(row) : null
  }

  /** What the data plane needs to route one request; read on every request. */
  route(name: string): RouteRecord | null {
    const cached = this.routes.get(name)
    if (cached !== undefined) return cached
    const row = this.sql(
      `SELECT shard, retired_at, locked_down_at, policy_mode, policy_api_key_sha256, policy_api_key_last_four,
         policy_ip_allowlist, policy_revision, policy_updated_at, ${QUARANTINED} AS quarantined
       FROM scripts s LEFT JOIN worker_quarantine q ON q.script = s.name WHERE s.name = ?`,
    ).get(name) as Row | undefined
    const route = row
      ? {
          shard: row.shard as number | null,
          retired: row.retired_at !== null,
          lockedDown: row.locked_down_at !== null,
          quarantined: row.quarantined === 1,
          policy: policyFromRow(row),
        }
      : null
    // Unknown names are not cached: anyone can ask for any number of them.
    if (route) this.routes.set(name, route)
    return route
  }

  scripts(): ScriptRecord[] {
    return (this.sql('SELECT * FROM scripts ORDER BY name').all() as Row[]).map(scriptFromRow)
  }

  /** One page of scripts sorted by name, starting after `afterName`. */
  scriptPage(afterName: string | null, limit: number): ScriptRecord[] {
    const rows = this.sql('SELECT * FROM scripts WHERE name > ? ORDER BY name LIMIT ?').all(afterName ?? '', limit) as Row[]
    return rows.map(scriptFromRow)
  }

  modulesOf(name: string): ModuleInfo[] {
    return this.sql('SELECT name, type, sha256, size FROM script_modules WHERE script = ? ORDER BY position').all(name) as ModuleInfo[]
  }

  moduleContent(sha256: string): Buffer {
    const row = this.sql('SELECT content FROM module_blobs WHERE sha256 = ?').get(sha256) as {content: Buffer} | undefined
    if (!row) throw new Error(`module blob ${sha256} is missing from the host state`)
    return row.content
  }

  /** The scripts a shard must run: assigned to it, not retired, not quarantined. */
  runnableScripts(shard: number): RunnableScript[] {
    const rows = this.sql(
      `SELECT s.* FROM scripts s LEFT JOIN worker_quarantine q ON q.script = s.name
       WHERE s.shard = ? AND s.retired_at IS NULL AND NOT ${QUARANTINED} ORDER BY s.name`,
    ).all(shard) as Row[]
    return rows.map((row) => this.runnable(scriptFromRow(row)))
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
      secrets: this.sql('SELECT name, value FROM secrets WHERE script = ? ORDER BY name').all(script.name) as RunnableScript['secrets'],
      serviceAccounts: this.sql('SELECT id, username, password FROM service_accounts WHERE script = ? ORDER BY id').all(
        script.name,
      ) as RunnableScript['serviceAccounts'],
      runtimeConfig: this.runtimeConfig(script.name).map((entry) => ({key: entry.key, valueJson: entry.valueJson})),
      operationSettingsJson: this.operationSettings(script.name).settingsJson,
    }
  }

  // ── Runaway incidents and quarantine ───────────────────────────────────────────────────────

  /**
   * Counts an incident against the script's current release; at `quarantineAfter` incidents that
   * release is quarantined. Returns the count and whether this incident quarantined it.
   */
  recordIncident(script: string, kind: string, quarantineAfter: number): {incidents: number; quarantined: boolean} {
    return this.write(() => {
      const current = this.sql('SELECT release_generation FROM scripts WHERE name = ?').get(script) as {release_generation: string | null} | undefined
      if (!current?.release_generation) return {incidents: 0, quarantined: false}
      const prior = this.sql('SELECT release_generation, incidents, quarantined_at FROM worker_quarantine WHERE script = ?').get(script) as Row | undefined
      const sameRelease = prior?.release_generation === current.release_generation
      if (sameRelease && prior!.quarantined_at !== null) return {incidents: prior!.incidents as number, quarantined: false}
      const incidents = (sameRelease ? (prior!.incidents as number) : 0) + 1
      const quarantined = incidents >= quarantineAfter
      this.sql(
        `INSERT INTO worker_quarantine (script, release_generation, incidents, last_incident, quarantined_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (script) DO UPDATE SET release_generation = excluded.release_generation, incidents = excluded.incidents,
           last_incident = excluded.last_incident, quarantined_at = excluded.quarantined_at`,
      ).run(script, current.release_generation, incidents, kind, quarantined ? Date.now() : null)
      return {incidents, quarantined}
    })
  }

  /** Scripts whose current release is quarantined, with the incident that tipped it. */
  quarantinedScripts(): Array<{script: string; releaseGeneration: string; incidents: number; lastIncident: string; quarantinedAt: number}> {
    return this.sql(
      `SELECT q.script, q.release_generation AS releaseGeneration, q.incidents, q.last_incident AS lastIncident, q.quarantined_at AS quarantinedAt
       FROM worker_quarantine q JOIN scripts s ON s.name = q.script WHERE ${QUARANTINED} ORDER BY q.script`,
    ).all() as Array<{script: string; releaseGeneration: string; incidents: number; lastIncident: string; quarantinedAt: number}>
  }

  /** Non-retired scripts per shard, for shards below `shardCount`. */
  private shardLoads(shardCount: number): Map<number, number> {
    const rows = this.sql('SELECT shard, COUNT(*) AS count FROM scripts WHERE retired_at IS NULL AND shard < ? GROUP BY shard').all(shardCount) as Array<{
      shard: number
      count: number
    }>
    return new Map(rows.map((row) => [row.shard, row.count]))
  }

  /** Moves scripts off shards that no longer exist (the shard count was lowered). */
  reassignOrphanedShards(shardCount: number): void {
    this.write(() => {
      const orphans = this.sql('SELECT name FROM scripts WHERE retired_at IS NULL AND shard >= ? ORDER BY name').all(shardCount) as Array<{
        name: string
      }>
      for (const {name} of orphans) {
        const shard = leastLoadedShard(this.shardLoads(shardCount), shardCount, Number.POSITIVE_INFINITY)!
        this.sql('UPDATE scripts SET shard = ? WHERE name = ?').run(shard, name)
      }
    })
  }

  // ── Scripts: mutations ──────────────────────────────────────────────────────────────────────

  /** Refuses when a fence is active (lifting expired ones first). */
  assertNotFenced(now = Date.now()): void {
    const fence = this.activeFence(now)
    if (fence) {
      throw new HostError(
        'edge_host_fenced',
        `the host is fenced for a backup (fence ${fence.fenceId} until ${new Date(fence.expiresAt).toISOString()}); mutations are refused`,
      )
    }
  }

  /** Refuses a mutation of a retired script (terminal for the kit). */
  assertNotRetired(name: string): void {
    const script = this.script(name)
    if (script?.retiredAt != null) throw new HostError('edge_host_script_retired', `script ${name} is retired`)
  }

  /** Identity of an upload's content: equal digests mean a repeated upload that changes nothing. */
  static uploadDigest(upload: ScriptUpload): string {
    return canonicalDigest({
      ...upload,
      modules: upload.modules.map((module) => ({name: module.name, type: module.type, sha256: sha256Hex(module.content)})),
    })
  }

  /** True when the script already holds exactly this upload (a retried upload). */
  holdsUpload(name: string, upload: ScriptUpload): boolean {
    const row = this.sql('SELECT content_digest FROM scripts WHERE name = ? AND retired_at IS NULL').get(name) as {content_digest: string | null} | undefined
    return row?.content_digest === HostState.uploadDigest(upload)
  }

  /**
   * Stores an upload, assigning a shard on the first one. Returns the shard to restart, or null
   * when the upload repeats what the script already holds.
   */
  saveUpload(name: string, upload: ScriptUpload, shards: {count: number; maxScriptsPerShard: number}): number | null {
    return this.write(() => {
      this.assertNotFenced()
      this.assertNotRetired(name)
      if (this.holdsUpload(name, upload)) return null
      this.assertNoSecretShadowed(name, upload.bindings)
      const now = Date.now()
      const existing = this.script(name)
      let shard = existing?.shard ?? null
      if (shard === null || shard >= shards.count) {
        shard = leastLoadedShard(this.shardLoads(shards.count), shards.count, shards.maxScriptsPerShard)
        if (shard === null) {
          throw new HostError('host_full', `every shard holds ${shards.maxScriptsPerShard} scripts; raise host.shards or host.max_scripts_per_shard`)
        }
      }
      const columns = {
        name,
        shard,
        release_generation: upload.releaseGeneration,
        main_module: upload.mainModule,
        compatibility_date: upload.compatibilityDate,
        compatibility_flags: JSON.stringify(upload.compatibilityFlags),
        builder_policy: upload.builderPolicy,
        tags: JSON.stringify(upload.tags),
        bindings: JSON.stringify(upload.bindings),
        content_digest: HostState.uploadDigest(upload),
        now,
      }
      this.sql(
        `INSERT INTO scripts (name, shard, release_generation, main_module, compatibility_date, compatibility_flags,
           builder_policy, tags, bindings, content_digest, created_at, updated_at, policy_updated_at)
         VALUES (@name, @shard, @release_generation, @main_module, @compatibility_date, @compatibility_flags,
           @builder_policy, @tags, @bindings, @content_digest, @now, @now, @now)
         ON CONFLICT (name) DO UPDATE SET shard = excluded.shard, release_generation = excluded.release_generation,
           main_module = excluded.main_module, compatibility_date = excluded.compatibility_date,
           compatibility_flags = excluded.compatibility_flags, builder_policy = excluded.builder_policy,
           tags = excluded.tags, bindings = excluded.bindings, content_digest = excluded.content_digest,
           updated_at = excluded.updated_at`,
      ).run(columns)
      this.replaceModules(name, upload.modules)
      return shard
    })
  }

  private replaceModules(name: string, modules: DecodedModule[]): void {
    const previous = new Set(this.modulesOf(name).map((module) => module.sha256))
    this.sql('DELETE FROM script_modules WHERE script = ?').run(name)
    modules.forEach((module, position) => {
      const digest = sha256Hex(module.content)
      this.sql('INSERT OR IGNORE INTO module_blobs (sha256, content) VALUES (?, ?)').run(digest, module.content)
      this.sql('INSERT INTO script_modules (script, position, name, type, sha256, size) VALUES (?, ?, ?, ?, ?, ?)').run(
        name,
        position,
        module.name,
        module.type,
        digest,
        module.content.length,
      )
    })
    // Blobs are shared by content: drop the old ones no script uses any more.
    for (const digest of previous) {
      this.sql('DELETE FROM module_blobs WHERE sha256 = ? AND NOT EXISTS (SELECT 1 FROM script_modules WHERE sha256 = ?)').run(digest, digest)
    }
  }

  /** Retires a script for good; a name the host never had is recorded as retired too. */
  retire(name: string): void {
    this.write(() => {
      this.assertNotFenced()
      const now = Date.now()
      this.sql(
        `INSERT INTO scripts (name, retired_at, created_at, updated_at, policy_updated_at) VALUES (@name, @now, @now, @now, @now)
         ON CONFLICT (name) DO UPDATE SET retired_at = COALESCE(retired_at, excluded.retired_at),
           updated_at = CASE WHEN retired_at IS NULL THEN excluded.updated_at ELSE updated_at END`,
      ).run({name, now})
    })
  }

  /**
   * Runs one control mutation of a live script: fence and retirement checks, the change, and — when
   * the caller sent a mutation id — its receipt, all in one transaction. A repeated mutation id
   * returns the stored result without applying anything.
   */
  control<T extends Record<string, unknown>>(name: string, operation: ReceiptOperation, meta: ControlMeta, apply: (now: number) => T): T {
    return this.write(() => {
      if (meta.mutationId !== undefined) {
        const earlier = this.receipt(meta.mutationId)
        if (earlier) {
          if (earlier.commandDigest !== meta.commandDigest || earlier.operation !== operation || earlier.scriptName !== name) {
            throw new HostError('mutation_conflict', `mutation ${meta.mutationId} was already applied with different facts`)
          }
          this.onControl?.(operation, 'replayed')
          return earlier.result as T
        }
      }
      this.assertNotFenced()
      if (!this.script(name)) throw new HostError('script_not_found', `script ${name} does not exist on this host`)
      this.assertNotRetired(name)
      const now = Date.now()
      const result = apply(now)
      if (meta.mutationId !== undefined) {
        this.sql('INSERT INTO receipts (mutation_id, command_digest, operation, script, result, created_at) VALUES (?, ?, ?, ?, ?, ?)').run(
          meta.mutationId,
          meta.commandDigest!,
          operation,
          name,
          JSON.stringify(result),
          now,
        )
      }
      this.onControl?.(operation, 'applied')
      return result
    })
  }

  /** Told of every control call: applied now, or answered from an earlier receipt (the host's metrics). */
  onControl?: (operation: ReceiptOperation, outcome: 'applied' | 'replayed') => void

  setLockdown(name: string, now: number): number {
    this.sql('UPDATE scripts SET locked_down_at = COALESCE(locked_down_at, ?), updated_at = ? WHERE name = ?').run(now, now, name)
    return this.script(name)!.lockedDownAt!
  }

  replacePolicy(
    name: string,
    policy: {mode: AccessPolicyMode; apiKeySha256: string | null; apiKeyLastFour: string | null; ipAllowlist: string[]; baseRevision?: number | undefined},
    now: number,
  ): AccessPolicyRecord {
    const current = this.script(name)!.policy
    this.assertPolicyRevision(current, policy.baseRevision)
    if (policy.mode === 'api_key' && policy.apiKeySha256 === null) {
      // The configured key is kept; api_key mode without any key is refused rather than locking everyone out unasked.
      if (current.apiKeySha256 === null) throw new HostError('api_key_not_configured', `script ${name} has no API key; rotate one first`)
      policy = {...policy, apiKeySha256: current.apiKeySha256, apiKeyLastFour: current.apiKeyLastFour}
    }
    this.sql(
      `UPDATE scripts SET policy_mode = ?, policy_api_key_sha256 = ?, policy_api_key_last_four = ?, policy_ip_allowlist = ?,
         policy_revision = policy_revision + 1, policy_updated_at = ? WHERE name = ?`,
    ).run(policy.mode, policy.apiKeySha256, policy.apiKeyLastFour, JSON.stringify(policy.ipAllowlist), now, name)
    return this.script(name)!.policy
  }

  private assertPolicyRevision(current: AccessPolicyRecord, baseRevision: number | undefined): void {
    if (baseRevision !== undefined && baseRevision !== current.revision) {
      throw new HostError('policy_revision_conflict', `the access policy is at revision ${current.revision}, not ${baseRevision}`)
    }
  }

  /** A new key (digest only) in api_key mode; the allowlist is dropped. */
  rotateApiKey(name: string, key: {apiKeySha256: string; apiKeyLastFour: string; baseRevision: number}, now: number): AccessPolicyRecord {
    this.assertPolicyRevision(this.script(name)!.policy, key.baseRevision)
    this.sql(
      `UPDATE scripts SET policy_mode = 'api_key', policy_api_key_sha256 = ?, policy_api_key_last_four = ?, policy_ip_allowlist = '[]',
         policy_revision = policy_revision + 1, policy_updated_at = ? WHERE name = ?`,
    ).run(key.apiKeySha256, key.apiKeyLastFour, now, name)
    return this.script(name)!.policy
  }

  /** Drops the key (the mode stays: api_key mode without a key lets nobody through). No key: nothing changes. */
  revokeApiKey(name: string, baseRevision: number, now: number): {revoked: boolean; policy: AccessPolicyRecord} {
    const current = this.script(name)!.policy
    this.assertPolicyRevision(current, baseRevision)
    if (current.apiKeySha256 === null) return {revoked: false, policy: current}
    this.sql(
      `UPDATE scripts SET policy_api_key_sha256 = NULL, policy_api_key_last_four = NULL, policy_revision = policy_revision + 1,
         policy_updated_at = ? WHERE name = ?`,
    ).run(now, name)
    return {revoked: true, policy: this.script(name)!.policy}
  }

  runtimeConfig(name: string): RuntimeConfigRecord[] {
    return this.sql('SELECT key, value_json AS valueJson, sha256, updated_at AS updatedAt FROM runtime_config WHERE script = ? ORDER BY key').all(
      name,
    ) as RuntimeConfigRecord[]
  }

  runtimeConfigRevision(name: string): {revision: number; updatedAt: number} {
    const row = this.sql('SELECT runtime_config_revision AS revision, runtime_config_updated_at AS updatedAt, created_at FROM scripts WHERE name = ?').get(
      name,
    ) as {revision: number; updatedAt: number | null; created_at: number}
    return {revision: row.revision, updatedAt: row.updatedAt ?? row.created_at}
  }

  private bumpRuntimeConfig(name: string, baseRevision: number, now: number): number {
    const {revision} = this.runtimeConfigRevision(name)
    if (baseRevision !== revision) throw new HostError('revision_conflict', `the runtime config is at revision ${revision}, not ${baseRevision}`)
    this.sql('UPDATE scripts SET runtime_config_revision = ?, runtime_config_updated_at = ? WHERE name = ?').run(revision + 1, now, name)
    return revision + 1
  }

  /** `valueJson` is stored canonical (keys sorted, no whitespace), so its digest is the value's. */
  putRuntimeConfig(name: string, key: string, valueJson: string, baseRevision: number, now: number): {revision: number; valueJson: string; sha256: string} {
    const revision = this.bumpRuntimeConfig(name, baseRevision, now)
    const canonical = canonicalJson(JSON.parse(valueJson))
    const sha256 = sha256Hex(canonical)
    this.sql(
      `INSERT INTO runtime_config (script, key, value_json, sha256, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (script, key) DO UPDATE SET value_json = excluded.value_json, sha256 = excluded.sha256, updated_at = excluded.updated_at`,
    ).run(name, key, canonical, sha256, now)
    return {revision, valueJson: canonical, sha256}
  }

  /** Deleting counts as a change (revision + 1) whether or not the key was set. */
  deleteRuntimeConfig(name: string, key: string, baseRevision: number, now: number): {revision: number; deleted: boolean} {
    const revision = this.bumpRuntimeConfig(name, baseRevision, now)
    return {revision, deleted: this.sql('DELETE FROM runtime_config WHERE script = ? AND key = ?').run(name, key).changes === 1}
  }

  operationSettings(name: string): OperationSettingsRecord {
    const row = this.sql(
      `SELECT operation_settings_json AS settingsJson, operation_settings_sha256 AS sha256, operation_settings_release AS releaseGeneration,
         operation_settings_revision AS revision, COALESCE(operation_settings_updated_at, created_at) AS updatedAt FROM scripts WHERE name = ?`,
    ).get(name) as OperationSettingsRecord
    return row
  }

  private assertOperationSettingsRevision(name: string, baseRevision: number): OperationSettingsRecord {
    const current = this.operationSettings(name)
    if (baseRevision !== current.revision)
      throw new HostError('revision_conflict', `the operation settings are at revision ${current.revision}, not ${baseRevision}`)
    return current
  }

  /** Settings belong to the release the script holds now. */
  replaceOperationSettings(
    name: string,
    settings: {releaseGeneration: string; settingsJson: string; baseRevision: number},
    now: number,
  ): OperationSettingsRecord {
    this.assertOperationSettingsRevision(name, settings.baseRevision)
    const stored = this.script(name)!.releaseGeneration
    if (stored !== settings.releaseGeneration) {
      throw new HostError('release_generation_mismatch', `script ${name} holds release ${stored ?? 'none'}, not ${settings.releaseGeneration}`)
    }
    const canonical = canonicalJson(JSON.parse(settings.settingsJson))
    this.sql(
      `UPDATE scripts SET operation_settings_json = ?, operation_settings_sha256 = ?, operation_settings_release = ?,
         operation_settings_revision = operation_settings_revision + 1, operation_settings_updated_at = ? WHERE name = ?`,
    ).run(canonical, sha256Hex(canonical), settings.releaseGeneration, now, name)
    return this.operationSettings(name)
  }

  /** Drops the settings; none stored: nothing changes (the revision stays). */
  revokeOperationSettings(name: string, baseRevision: number, now: number): {revoked: boolean; settings: OperationSettingsRecord} {
    const current = this.assertOperationSettingsRevision(name, baseRevision)
    if (current.settingsJson === null) return {revoked: false, settings: current}
    this.sql(
      `UPDATE scripts SET operation_settings_json = NULL, operation_settings_sha256 = NULL, operation_settings_release = NULL,
         operation_settings_revision = operation_settings_revision + 1, operation_settings_updated_at = ? WHERE name = ?`,
    ).run(now, name)
    return {revoked: true, settings: this.operationSettings(name)}
  }

  /** The values of a script's secrets (and service-account passwords): kept out of its tail events. */
  secretValues(name: string): string[] {
    const rows = this.sql('SELECT value FROM secrets WHERE script = @name UNION ALL SELECT password FROM service_accounts WHERE script = @name').all({
      name,
    }) as Array<{value: string}>
    return rows.map((row) => row.value)
  }

  secrets(name: string): Array<{name: string; sha256: string; updatedAt: number}> {
    return this.sql('SELECT name, sha256, updated_at AS updatedAt FROM secrets WHERE script = ? ORDER BY name').all(name) as Array<{
      name: string
      sha256: string
      updatedAt: number
    }>
  }

  putSecret(name: string, secretName: string, value: string, now: number): {sha256: string} {
    if (this.script(name)!.bindings.some((binding) => binding.name === secretName)) {
      throw new HostError('binding_name_taken', `script ${name} already has a binding named ${secretName}`)
    }
    const sha256 = sha256Hex(value)
    this.sql(
      `INSERT INTO secrets (script, name, value, sha256, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (script, name) DO UPDATE SET value = excluded.value, sha256 = excluded.sha256, updated_at = excluded.updated_at`,
    ).run(name, secretName, value, sha256, now)
    return {sha256}
  }

  deleteSecret(name: string, secretName: string): boolean {
    return this.sql('DELETE FROM secrets WHERE script = ? AND name = ?').run(name, secretName).changes === 1
  }

  purgeSecrets(name: string): string[] {
    const names = this.secrets(name).map((secret) => secret.name)
    this.sql('DELETE FROM secrets WHERE script = ?').run(name)
    return names
  }

  serviceAccounts(name: string): Array<{id: string; username: string; passwordSha256: string; updatedAt: number}> {
    return this.sql('SELECT id, username, password_sha256 AS passwordSha256, updated_at AS updatedAt FROM service_accounts WHERE script = ? ORDER BY id').all(
      name,
    ) as Array<{id: string; username: string; passwordSha256: string; updatedAt: number}>
  }

  putServiceAccount(name: string, id: string, username: string, password: string, now: number): {passwordSha256: string} {
    const passwordSha256 = sha256Hex(password)
    this.sql(
      `INSERT INTO service_accounts (script, id, username, password, password_sha256, updated_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (script, id) DO UPDATE SET username = excluded.username, password = excluded.password,
         password_sha256 = excluded.password_sha256, updated_at = excluded.updated_at`,
    ).run(name, id, username, password, passwordSha256, now)
    return {passwordSha256}
  }

  deleteServiceAccount(name: string, id: string): boolean {
    return this.sql('DELETE FROM service_accounts WHERE script = ? AND id = ?').run(name, id).changes === 1
  }

  purgeServiceAccounts(name: string): string[] {
    const ids = this.serviceAccounts(name).map((account) => account.id)
    this.sql('DELETE FROM service_accounts WHERE script = ?').run(name)
    return ids
  }

  /** A binding may not take a name a secret already holds (the secret would shadow it). */
  private assertNoSecretShadowed(name: string, bindings: Binding[]): void {
    const secretNames = new Set(this.secrets(name).map((secret) => secret.name))
    const clash = bindings.find((binding) => secretNames.has(binding.name))
    if (clash) throw new HostError('binding_name_taken', `script ${name} has a secret named ${clash.name}; bindings cannot reuse it`)
  }

  // ── Receipts ────────────────────────────────────────────────────────────────────────────────

  receipt(mutationId: string): ReceiptRecord | null {
    const row = this.sql('SELECT * FROM receipts WHERE mutation_id = ?').get(mutationId) as Row | undefined
    if (!row) return null
    return {
      mutationId: row.mutation_id as string,
      commandDigest: row.command_digest as string,
      operation: row.operation as ReceiptOperation,
      scriptName: row.script as string,
      result: JSON.parse(row.result as string) as Record<string, unknown>,
      createdAt: row.created_at as number,
      acknowledgedAt: row.acknowledged_at as number | null,
    }
  }

  acknowledgeReceipt(mutationId: string): boolean {
    return this.write(() => {
      this.assertNotFenced()
      const update = this.sql('UPDATE receipts SET acknowledged_at = COALESCE(acknowledged_at, ?) WHERE mutation_id = ?')
      return update.run(Date.now(), mutationId).changes === 1
    })
  }

  // ── Fences ──────────────────────────────────────────────────────────────────────────────────

  /** Lifts every fence whose TTL has passed, as of its expiry time. */
  expireFences(now = Date.now()): void {
    this.sql(`UPDATE fences SET lifted_at = expires_at, lift_reason = 'expired' WHERE lifted_at IS NULL AND expires_at <= ?`).run(now)
  }

  activeFence(now = Date.now()): FenceRecord | null {
    this.expireFences(now)
    const row = this.sql('SELECT * FROM fences WHERE lifted_at IS NULL').get() as Row | undefined
    return row ? fenceFromRow(row) : null
  }

  fence(fenceId: string): FenceRecord | null {
    this.expireFences()
    const row = this.sql('SELECT * FROM fences WHERE fence_id = ?').get(fenceId) as Row | undefined
    return row ? fenceFromRow(row) : null
  }

  recentFences(): FenceRecord[] {
    this.expireFences()
    const rows = this.sql('SELECT * FROM fences WHERE lifted_at IS NOT NULL ORDER BY lifted_at DESC, fence_id LIMIT ?').all(FENCE_HISTORY) as Row[]
    return rows.map(fenceFromRow)
  }

  /** Begins a fence; the same active id again is a no-op (`created: false`). */
  beginFence(fenceId: string, ttlSeconds: number, reason: string): {fence: FenceRecord; created: boolean} {
    return this.write(() => {
      const now = Date.now()
      const active = this.activeFence(now)
      if (active?.fenceId === fenceId) return {fence: active, created: false}
      if (active) throw new HostError('fence_active', `fence ${active.fenceId} is active until ${new Date(active.expiresAt).toISOString()}`)
      if (this.fence(fenceId)) throw new HostError('fence_lifted', `fence ${fenceId} was already lifted; begin a new fence id`)
      this.sql('INSERT INTO fences (fence_id, reason, started_at, expires_at) VALUES (?, ?, ?, ?)').run(fenceId, reason, now, now + ttlSeconds * 1000)
      this.pruneFenceHistory()
      return {fence: this.fence(fenceId)!, created: true}
    })
  }

  endFence(fenceId: string): FenceRecord {
    return this.write(() => {
      const fence = this.fence(fenceId)
      if (!fence) throw new HostError('fence_not_found', `the host has no fence ${fenceId}`)
      if (fence.liftedAt === null) {
        this.sql(`UPDATE fences SET lifted_at = ?, lift_reason = 'ended' WHERE fence_id = ?`).run(Date.now(), fenceId)
      }
      return this.fence(fenceId)!
    })
  }

  // ── Snapshots ───────────────────────────────────────────────────────────────────────────────

  /** A consistent copy of the state in `file`, through SQLite's online backup (writers keep going). */
  async backupTo(file: string): Promise<void> {
    await this.db.backup(file)
  }

  /**
   * Makes a backup copy self-contained (no WAL beside it) and records `fenceId` — the fence the copy
   * was taken under — as lifted in it, so a host started from the copy is not frozen.
   */
  static sealSnapshotCopy(file: string, fenceId: string, liftedAt: number): void {
    const copy = new Database(file)
    try {
      copy.pragma('journal_mode = DELETE')
      copy.prepare(`UPDATE fences SET lifted_at = ?, lift_reason = 'ended' WHERE fence_id = ? AND lifted_at IS NULL`).run(liftedAt, fenceId)
    } finally {
      copy.close()
    }
  }

  private pruneFenceHistory(): void {
    this.sql(
      `DELETE FROM fences WHERE lifted_at IS NOT NULL AND fence_id NOT IN
         (SELECT fence_id FROM fences WHERE lifted_at IS NOT NULL ORDER BY lifted_at DESC LIMIT ?)`,
    ).run(FENCE_HISTORY)
  }
}

/** Least-loaded shard with room (lowest index on ties), or null when all are full. */
function leastLoadedShard(loads: Map<number, number>, shardCount: number, maxPerShard: number): number | null {
  let best: number | null = null
  for (let shard = 0; shard < shardCount; shard++) {
    const load = loads.get(shard) ?? 0
    if (load < maxPerShard && (best === null || load < (loads.get(best) ?? 0))) best = shard
  }
  return best
}

/** 20 characters of Crockford base32 (100 bits) in groups of four: easy to read out and type. */
function newPairingCode(): string {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
  const characters = Array.from({length: 20}, () => alphabet[randomInt(alphabet.length)])
  return characters.join('').replace(/(.{4})(?=.)/g, '$1-')
}

/** Codes are compared case-insensitively, ignoring spaces. */
function normalizePairingCode(code: string): string {
  return code.trim().toUpperCase().replace(/\s+/g, '')
}

/** Constant time, over fixed-size digests so not even the length of the expected text leaks. */
function sameText(a: string, b: string): boolean {
  return timingSafeEqual(Buffer.from(sha256Hex(a), 'hex'), Buffer.from(sha256Hex(b), 'hex'))
}

function scriptFromRow(row: Row): ScriptRecord {
  return {
    name: row.name as string,
    shard: row.shard as number | null,
    releaseGeneration: row.release_generation as string | null,
    mainModule: row.main_module as string | null,
    compatibilityDate: row.compatibility_date as string | null,
    compatibilityFlags: JSON.parse(row.compatibility_flags as string) as string[],
    builderPolicy: row.builder_policy as string | null,
    tags: JSON.parse(row.tags as string) as string[],
    bindings: JSON.parse(row.bindings as string) as Binding[],
    lockedDownAt: row.locked_down_at as number | null,
    retiredAt: row.retired_at as number | null,
    createdAt: row.created_at as number,
    updatedAt: row.updated_at as number,
    policy: policyFromRow(row),
  }
}

function policyFromRow(row: Row): AccessPolicyRecord {
  return {
    mode: row.policy_mode as AccessPolicyMode,
    apiKeySha256: row.policy_api_key_sha256 as string | null,
    apiKeyLastFour: row.policy_api_key_last_four as string | null,
    ipAllowlist: JSON.parse(row.policy_ip_allowlist as string) as string[],
    revision: row.policy_revision as number,
    updatedAt: row.policy_updated_at as number,
  }
}

function fenceFromRow(row: Row): FenceRecord {
  return {
    fenceId: row.fence_id as string,
    reason: row.reason as string,
    startedAt: row.started_at as number,
    expiresAt: row.expires_at as number,
    liftedAt: row.lifted_at as number | null,
    liftReason: row.lift_reason as FenceRecord['liftReason'],
  }
}
