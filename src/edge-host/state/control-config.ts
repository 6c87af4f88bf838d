// A script's control configuration: its access policy (mode, API key digest, IP allowlist), its
// runtime config entries and its operation settings. Each of the three has its own revision; a
// change names the revision it was based on and is refused when that moved meanwhile. JSON values
// are stored canonical (keys sorted, no whitespace), so a stored digest is the value's.
import {canonicalJson, sha256Hex} from '../../canonical-json.js'
import type {AccessPolicyMode, ControlCopy} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
import type {HostDatabase} from './database.js'
import type {FencedTx} from './fences.js'

export interface AccessPolicyRecord {
  mode: AccessPolicyMode
  apiKeySha256: string | null
  apiKeyLastFour: string | null
  ipAllowlist: string[]
  revision: number
  updatedAt: number
}

/** The access policy's columns of a `scripts` row. */
export interface PolicyColumns {
  policy_mode: AccessPolicyMode
  policy_api_key_sha256: string | null
  policy_api_key_last_four: string | null
  policy_ip_allowlist: string
  policy_revision: number
  policy_updated_at: number
}

export const POLICY_COLUMNS = 'policy_mode, policy_api_key_sha256, policy_api_key_last_four, policy_ip_allowlist, policy_revision, policy_updated_at'

export function policyFromRow(row: PolicyColumns): AccessPolicyRecord {
  return {
    mode: row.policy_mode,
    apiKeySha256: row.policy_api_key_sha256,
    apiKeyLastFour: row.policy_api_key_last_four,
    ipAllowlist: JSON.parse(row.policy_ip_allowlist),
    revision: row.policy_revision,
    updatedAt: row.policy_updated_at,
  }
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

/** The parts of a control copy this repository holds. */
export type ControlConfigCopy = Pick<ControlCopy, 'accessPolicy' | 'runtimeConfig' | 'operationSettings'>

export interface PolicyChange {
  mode: AccessPolicyMode
  apiKeySha256: string | null
  apiKeyLastFour: string | null
  ipAllowlist: string[]
  baseRevision?: number | undefined
}

export class ControlConfig {
  constructor(private readonly db: HostDatabase) {}

  // ── Access policy ───────────────────────────────────────────────────────────────────────────

  policy(script: string): AccessPolicyRecord {
    return policyFromRow(this.db.one<PolicyColumns>(`SELECT ${POLICY_COLUMNS} FROM scripts WHERE name = ?`, script)!)
  }

  replacePolicy(tx: FencedTx, script: string, change: PolicyChange): AccessPolicyRecord {
    const current = this.policy(script)
    assertPolicyRevision(current, change.baseRevision)
    let policy = change
    if (policy.mode === 'api_key' && policy.apiKeySha256 === null) {
      // The configured key is kept; api_key mode without any key is refused rather than locking everyone out unasked.
      if (current.apiKeySha256 === null) throw new HostError('api_key_not_configured', `script ${script} has no API key; rotate one first`)
      policy = {...policy, apiKeySha256: current.apiKeySha256, apiKeyLastFour: current.apiKeyLastFour}
    }
    tx.run(
      `UPDATE scripts SET policy_mode = ?, policy_api_key_sha256 = ?, policy_api_key_last_four = ?, policy_ip_allowlist = ?,
         policy_revision = policy_revision + 1, policy_updated_at = ? WHERE name = ?`,
      policy.mode,
      policy.apiKeySha256,
      policy.apiKeyLastFour,
      JSON.stringify(policy.ipAllowlist),
      tx.now,
      script,
    )
    return this.policy(script)
  }

  /** A new key (digest only) in api_key mode; the allowlist is dropped. */
  rotateApiKey(tx: FencedTx, script: string, key: {apiKeySha256: string; apiKeyLastFour: string; baseRevision: number}): AccessPolicyRecord {
    assertPolicyRevision(this.policy(script), key.baseRevision)
    tx.run(
      `UPDATE scripts SET policy_mode = 'api_key', policy_api_key_sha256 = ?, policy_api_key_last_four = ?, policy_ip_allowlist = '[]',
         policy_revision = policy_revision + 1, policy_updated_at = ? WHERE name = ?`,
      key.apiKeySha256,
      key.apiKeyLastFour,
      tx.now,
      script,
    )
    return this.policy(script)
  }

  /** Drops the key (the mode stays: api_key mode without a key lets nobody through). No key: nothing changes. */
  revokeApiKey(tx: FencedTx, script: string, baseRevision: number): {revoked: boolean; policy: AccessPolicyRecord} {
    const current = this.policy(script)
    assertPolicyRevision(current, baseRevision)
    if (current.apiKeySha256 === null) return {revoked: false, policy: current}
    tx.run(
      `UPDATE scripts SET policy_api_key_sha256 = NULL, policy_api_key_last_four = NULL, policy_revision = policy_revision + 1,
         policy_updated_at = ? WHERE name = ?`,
      tx.now,
      script,
    )
    return {revoked: true, policy: this.policy(script)}
  }

  /**
   * Sets the script's whole control configuration to a copy taken from another host of its kit,
   * revisions included (the next mutation the kit sends names the same base revision on every host).
   */
  replaceAll(tx: FencedTx, script: string, copy: ControlConfigCopy): void {
    const {accessPolicy: policy, runtimeConfig, operationSettings: settings} = copy
    tx.run(
      `UPDATE scripts SET policy_mode = ?, policy_api_key_sha256 = ?, policy_api_key_last_four = ?, policy_ip_allowlist = ?, policy_revision = ?,
         policy_updated_at = ?, runtime_config_revision = ?, runtime_config_updated_at = ?, operation_settings_json = ?, operation_settings_sha256 = ?,
         operation_settings_release = ?, operation_settings_revision = ?, operation_settings_updated_at = ? WHERE name = ?`,
      policy.mode,
      policy.apiKeySha256,
      policy.apiKeyLastFour,
      JSON.stringify(policy.ipAllowlist),
      policy.revision,
      tx.now,
      runtimeConfig.revision,
      tx.now,
      settings.settingsJson === null ? null : canonicalJson(JSON.parse(settings.settingsJson)),
      settings.settingsJson === null ? null : sha256Hex(canonicalJson(JSON.parse(settings.settingsJson))),
      settings.releaseGeneration,
      settings.revision,
      tx.now,
      script,
    )
    tx.run('DELETE FROM runtime_config WHERE script = ?', script)
    for (const entry of runtimeConfig.entries) {
      const canonical = canonicalJson(JSON.parse(entry.valueJson))
      tx.upsert('runtime_config', ['script', 'key'], {script, key: entry.key, value_json: canonical, sha256: sha256Hex(canonical), updated_at: tx.now})
    }
  }

  // ── Runtime config ──────────────────────────────────────────────────────────────────────────

  runtimeConfig(script: string): RuntimeConfigRecord[] {
    return this.db.all<RuntimeConfigRecord>(
      'SELECT key, value_json AS valueJson, sha256, updated_at AS updatedAt FROM runtime_config WHERE script = ? ORDER BY key',
      script,
    )
  }

  runtimeConfigRevision(script: string): {revision: number; updatedAt: number} {
    return this.db.one<{revision: number; updatedAt: number}>(
      'SELECT runtime_config_revision AS revision, COALESCE(runtime_config_updated_at, created_at) AS updatedAt FROM scripts WHERE name = ?',
      script,
    )!
  }

  putRuntimeConfig(
    tx: FencedTx,
    script: string,
    key: string,
    change: {valueJson: string; baseRevision: number},
  ): {revision: number; valueJson: string; sha256: string} {
    const revision = this.bumpRuntimeConfig(tx, script, change.baseRevision)
    const canonical = canonicalJson(JSON.parse(change.valueJson))
    const sha256 = sha256Hex(canonical)
    tx.upsert('runtime_config', ['script', 'key'], {script, key, value_json: canonical, sha256, updated_at: tx.now})
    return {revision, valueJson: canonical, sha256}
  }

  /** Deleting counts as a change (revision + 1) whether or not the key was set. */
  deleteRuntimeConfig(tx: FencedTx, script: string, key: string, baseRevision: number): {revision: number; deleted: boolean} {
    const revision = this.bumpRuntimeConfig(tx, script, baseRevision)
    return {revision, deleted: tx.run('DELETE FROM runtime_config WHERE script = ? AND key = ?', script, key).changes === 1}
  }

  private bumpRuntimeConfig(tx: FencedTx, script: string, baseRevision: number): number {
    const {revision} = this.runtimeConfigRevision(script)
    if (baseRevision !== revision) throw new HostError('revision_conflict', `the runtime config is at revision ${revision}, not ${baseRevision}`)
    tx.run('UPDATE scripts SET runtime_config_revision = ?, runtime_config_updated_at = ? WHERE name = ?', revision + 1, tx.now, script)
    return revision + 1
  }

  // ── Operation settings ──────────────────────────────────────────────────────────────────────

  operationSettings(script: string): OperationSettingsRecord {
    return this.db.one<OperationSettingsRecord>(
      `SELECT operation_settings_json AS settingsJson, operation_settings_sha256 AS sha256, operation_settings_release AS releaseGeneration,
         operation_settings_revision AS revision, COALESCE(operation_settings_updated_at, created_at) AS updatedAt FROM scripts WHERE name = ?`,
      script,
    )!
  }

  /** Settings belong to the release the script holds now. */
  replaceOperationSettings(
    tx: FencedTx,
    script: string,
    settings: {releaseGeneration: string; settingsJson: string; baseRevision: number},
  ): OperationSettingsRecord {
    this.assertOperationSettingsRevision(script, settings.baseRevision)
    const stored = this.db.one<{release_generation: string | null}>('SELECT release_generation FROM scripts WHERE name = ?', script)!.release_generation
    if (stored !== settings.releaseGeneration) {
      throw new HostError('release_generation_mismatch', `script ${script} holds release ${stored ?? 'none'}, not ${settings.releaseGeneration}`)
    }
    const canonical = canonicalJson(JSON.parse(settings.settingsJson))
    tx.run(
      `UPDATE scripts SET operation_settings_json = ?, operation_settings_sha256 = ?, operation_settings_release = ?,
         operation_settings_revision = operation_settings_revision + 1, operation_settings_updated_at = ? WHERE name = ?`,
      canonical,
      sha256Hex(canonical),
      settings.releaseGeneration,
      tx.now,
      script,
    )
    return this.operationSettings(script)
  }

  /** Drops the settings; none stored: nothing changes (the revision stays). */
  revokeOperationSettings(tx: FencedTx, script: string, baseRevision: number): {revoked: boolean; settings: OperationSettingsRecord} {
    const current = this.assertOperationSettingsRevision(script, baseRevision)
    if (current.settingsJson === null) return {revoked: false, settings: current}
    tx.run(
      `UPDATE scripts SET operation_settings_json = NULL, operation_settings_sha256 = NULL, operation_settings_release = NULL,
         operation_settings_revision = operation_settings_revision + 1, operation_settings_updated_at = ? WHERE name = ?`,
      tx.now,
      script,
    )
    return {revoked: true, settings: this.operationSettings(script)}
  }

  private assertOperationSettingsRevision(script: string, baseRevision: number): OperationSettingsRecord {
    const current = this.operationSettings(script)
    if (baseRevision !== current.revision) {
      throw new HostError('revision_conflict', `the operation settings are at revision ${current.revision}, not ${baseRevision}`)
    }
    return current
  }
}

function assertPolicyRevision(current: AccessPolicyRecord, baseRevision: number | undefined): void {
  if (baseRevision !== undefined && baseRevision !== current.revision) {
    throw new HostError('policy_revision_conflict', `the access policy is at revision ${current.revision}, not ${baseRevision}`)
  }
}
