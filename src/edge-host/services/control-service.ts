// The control plane's host side, per script: access policy writes, runtime config, operation
// settings, secrets and service accounts. Every mutation is one fence-checked state transaction that
// also keeps its receipt (HostState.control); one that changes the Worker's env has the script's
// shard pick it up (`refresh`). Answers are the protocol's wire shapes.
import {canonicalJson} from '../../canonical-json.js'
import type {
  AccessPolicy,
  ControlCopy,
  ControlMeta,
  ControlResult,
  DeleteResult,
  OperationSettings,
  Purge,
  PutRuntimeConfig,
  ReceiptOperation,
  ReplaceAccessPolicy,
  ReplaceOperationSettings,
  RevisionOnly,
  RevokeResult,
  RotateApiKey,
  RuntimeConfigEntry,
  RuntimeConfigList,
  SecretDeletion,
  SecretInfo,
  SecretList,
  ServiceAccountDeletion,
  ServiceAccountInfo,
  ServiceAccountList,
} from '../../protocol/management-api.js'
import {assertScriptName, iso, operationSettingsView, policyView, requireScript} from './common.js'
import type {FencedTx, HostState} from '../state/host-state.js'

export class ControlService {
  constructor(
    private readonly state: HostState,
    /** The script's env changed: its shard must pick the change up (resolves once it has). */
    private readonly refresh: (name: string) => Promise<void>,
  ) {}

  replaceAccessPolicy(name: string, body: ReplaceAccessPolicy): ControlResult<AccessPolicy> {
    assertScriptName(name)
    return this.state.control(name, 'access_policy.replace', body, (tx) => {
      const policy = this.state.controlConfig.replacePolicy(tx, name, {
        mode: body.mode,
        apiKeySha256: body.apiKeySha256 ?? null,
        apiKeyLastFour: body.apiKeyLastFour ?? null,
        ipAllowlist: body.ipAllowlist ?? [],
        baseRevision: body.baseRevision,
      })
      return {conflict: false as const, current: policyView(policy)}
    })
  }

  rotateApiKey(name: string, body: RotateApiKey): ControlResult<AccessPolicy> {
    assertScriptName(name)
    return this.state.control(name, 'access_policy.api_key.rotate', body, (tx) => ({
      conflict: false as const,
      current: policyView(this.state.controlConfig.rotateApiKey(tx, name, body)),
    }))
  }

  revokeApiKey(name: string, body: RevisionOnly): RevokeResult<AccessPolicy> {
    assertScriptName(name)
    return this.state.control(name, 'access_policy.api_key.revoke', body, (tx) => {
      const {revoked, policy} = this.state.controlConfig.revokeApiKey(tx, name, body.baseRevision)
      return {conflict: false as const, revoked, current: policyView(policy)}
    })
  }

  runtimeConfig(name: string): RuntimeConfigList {
    assertScriptName(name)
    requireScript(this.state, name)
    return {
      revision: this.state.controlConfig.runtimeConfigRevision(name).revision,
      entries: this.state.controlConfig
        .runtimeConfig(name)
        .map((entry) => ({key: entry.key, valueJson: entry.valueJson, sha256: entry.sha256, updated_at: iso(entry.updatedAt)})),
    }
  }

  putRuntimeConfig(name: string, key: string, body: PutRuntimeConfig): ControlResult<RuntimeConfigEntry> {
    return this.changeEnv(name, 'runtime_config.replace', body, (tx) => {
      const stored = this.state.controlConfig.putRuntimeConfig(tx, name, key, body)
      return {conflict: false as const, current: {key, valueJson: stored.valueJson, sha256: stored.sha256, revision: stored.revision, updated_at: iso(tx.now)}}
    })
  }

  deleteRuntimeConfig(name: string, key: string, body: RevisionOnly): ControlResult<RuntimeConfigEntry> {
    assertScriptName(name)
    let deleted = false
    const result = this.state.control(name, 'runtime_config.delete', body, (tx) => {
      const outcome = this.state.controlConfig.deleteRuntimeConfig(tx, name, key, body.baseRevision)
      deleted = outcome.deleted
      return {conflict: false as const, current: {key, valueJson: null, sha256: null, revision: outcome.revision, updated_at: iso(tx.now)}}
    })
    if (deleted) void this.refresh(name)
    return result
  }

  operationSettings(name: string): OperationSettings {
    assertScriptName(name)
    requireScript(this.state, name)
    return operationSettingsView(this.state.controlConfig.operationSettings(name))
  }

  replaceOperationSettings(name: string, body: ReplaceOperationSettings): ControlResult<OperationSettings> {
    return this.changeEnv(name, 'operation_settings.replace', body, (tx) => ({
      conflict: false as const,
      current: operationSettingsView(this.state.controlConfig.replaceOperationSettings(tx, name, body)),
    }))
  }

  revokeOperationSettings(name: string, body: RevisionOnly): RevokeResult<OperationSettings> {
    return this.changeEnv(
      name,
      'operation_settings.revoke',
      body,
      (tx) => {
        const {revoked, settings} = this.state.controlConfig.revokeOperationSettings(tx, name, body.baseRevision)
        return {conflict: false as const, revoked, current: operationSettingsView(settings)}
      },
      (result) => result.revoked,
    )
  }

  secrets(name: string): SecretList {
    assertScriptName(name)
    requireScript(this.state, name)
    return {secrets: this.state.credentials.secrets(name).map((secret) => ({name: secret.name, sha256: secret.sha256, updated_at: iso(secret.updatedAt)}))}
  }

  putSecret(name: string, secretName: string, body: {value: string} & ControlMeta): ControlResult<SecretInfo> {
    return this.changeEnv(name, 'secrets.put', body, (tx) => {
      const {sha256} = this.state.credentials.putSecret(tx, name, secretName, body.value)
      return {conflict: false as const, current: {name: secretName, sha256, updated_at: iso(tx.now)}}
    })
  }

  deleteSecret(name: string, secretName: string, meta: ControlMeta): DeleteResult<SecretDeletion> {
    return this.changeEnv(
      name,
      'secrets.delete',
      meta,
      (tx) => {
        const deleted = this.state.credentials.deleteSecret(tx, name, secretName)
        return {conflict: false as const, deleted, current: {name: secretName, deleted, updated_at: iso(tx.now)}}
      },
      deletedSome,
    )
  }

  purgeSecrets(name: string, meta: ControlMeta): ControlResult<Purge> {
    return this.changeEnv(
      name,
      'secrets.purge',
      meta,
      (tx) => ({conflict: false as const, current: {purged: this.state.credentials.purgeSecrets(tx, name), updated_at: iso(tx.now)}}),
      purgedSome,
    )
  }

  serviceAccounts(name: string): ServiceAccountList {
    assertScriptName(name)
    requireScript(this.state, name)
    return {
      serviceAccounts: this.state.credentials.serviceAccounts(name).map((account) => ({
        serviceAccountId: account.id,
        username: account.username,
        passwordDigest: account.passwordSha256,
        updated_at: iso(account.updatedAt),
      })),
    }
  }

  putServiceAccount(name: string, id: string, body: {username: string; password: string} & ControlMeta): ControlResult<ServiceAccountInfo> {
    return this.changeEnv(name, 'service_accounts.credentials.put', body, (tx) => {
      const {passwordSha256} = this.state.credentials.putServiceAccount(tx, name, id, body)
      return {conflict: false as const, current: {serviceAccountId: id, username: body.username, passwordDigest: passwordSha256, updated_at: iso(tx.now)}}
    })
  }

  deleteServiceAccount(name: string, id: string, meta: ControlMeta): DeleteResult<ServiceAccountDeletion> {
    return this.changeEnv(
      name,
      'service_accounts.credentials.delete',
      meta,
      (tx) => {
        const deleted = this.state.credentials.deleteServiceAccount(tx, name, id)
        return {conflict: false as const, deleted, current: {serviceAccountId: id, deleted, updated_at: iso(tx.now)}}
      },
      deletedSome,
    )
  }

  purgeServiceAccounts(name: string, meta: ControlMeta): ControlResult<Purge> {
    return this.changeEnv(
      name,
      'service_accounts.credentials.purge',
      meta,
      (tx) => ({conflict: false as const, current: {purged: this.state.credentials.purgeServiceAccounts(tx, name), updated_at: iso(tx.now)}}),
      purgedSome,
    )
  }

  /** The whole control state, secret values and passwords included: for the kit to copy to another host of the kit. */
  copy(name: string): ControlCopy {
    assertScriptName(name)
    requireScript(this.state, name)
    const {controlConfig: config, credentials} = this.state
    const policy = config.policy(name)
    const settings = config.operationSettings(name)
    return {
      accessPolicy: {
        mode: policy.mode,
        apiKeySha256: policy.apiKeySha256,
        apiKeyLastFour: policy.apiKeyLastFour,
        ipAllowlist: policy.ipAllowlist,
        revision: policy.revision,
      },
      runtimeConfig: {
        revision: config.runtimeConfigRevision(name).revision,
        entries: config.runtimeConfig(name).map((entry) => ({key: entry.key, valueJson: entry.valueJson})),
      },
      operationSettings: {settingsJson: settings.settingsJson, releaseGeneration: settings.releaseGeneration, revision: settings.revision},
      secrets: credentials.secretValuesByName(name),
      serviceAccounts: credentials.serviceAccountLogins(name),
    }
  }

  /**
   * Makes the script's control state exactly `copy`; when anything changed, answers once the shard
   * serves the new env (the kit confirms the host ready right after: its Worker must see the secrets).
   */
  async writeCopy(name: string, copy: ControlCopy): Promise<{changed: boolean}> {
    assertScriptName(name)
    requireScript(this.state, name)
    if (canonicalJson(this.copy(name)) === canonicalJson(copy)) return {changed: false}
    this.state.replaceControl(name, (tx) => {
      this.state.controlConfig.replaceAll(tx, name, copy)
      this.state.credentials.replaceAll(tx, name, copy)
    })
    await this.refresh(name)
    return {changed: true}
  }

  /**
   * A mutation of the script's env (runtime config, operation settings, secrets, service accounts)
   * in its control transaction; the script's shard picks it up when `changed` says the result —
   * the stored one, for a replayed mutation — changed something.
   */
  private changeEnv<T extends Record<string, unknown>>(
    name: string,
    operation: ReceiptOperation,
    meta: ControlMeta,
    apply: (tx: FencedTx) => T,
    changed: (result: T) => boolean = () => true,
  ): T {
    assertScriptName(name)
    const result = this.state.control(name, operation, meta, apply)
    if (changed(result)) void this.refresh(name)
    return result
  }
}

const deletedSome = (result: {deleted: boolean}) => result.deleted
const purgedSome = (result: {current: Purge}) => result.current.purged.length > 0
