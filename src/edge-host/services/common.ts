// Shared by the host's services: the lookups every script operation starts with, and the wire views
// of host-state records.
import {SCRIPT_NAME_PATTERN, type AccessPolicy, type OperationSettings} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
import type {AccessPolicyRecord, HostState, OperationSettingsRecord, ScriptRecord} from '../state/host-state.js'

export const iso = (ms: number) => new Date(ms).toISOString()
export const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms))

export function assertScriptName(name: string): void {
  if (!SCRIPT_NAME_PATTERN.test(name)) throw new HostError('invalid_script_name', `script name ${JSON.stringify(name)} must match ^dw-[0-9a-f]{48}$`)
}

export function requireScript(state: HostState, name: string): ScriptRecord {
  const script = state.scripts.get(name)
  if (!script) throw new HostError('script_not_found', `script ${name} does not exist on this host`)
  return script
}

export function policyView(policy: AccessPolicyRecord): AccessPolicy {
  return {
    mode: policy.mode,
    api_key_configured: policy.apiKeySha256 !== null,
    api_key_last_four: policy.apiKeyLastFour,
    ip_allowlist: policy.ipAllowlist,
    revision: policy.revision,
    updated_at: iso(policy.updatedAt),
  }
}

/** What the host answers is always reconciled with its revision; no settings stored shows null digest and release. */
export function operationSettingsView(settings: OperationSettingsRecord): OperationSettings {
  return {
    state: 'reconciled',
    releaseGeneration: settings.releaseGeneration,
    settingsSha256: settings.sha256,
    revision: settings.revision,
    updated_at: iso(settings.updatedAt),
  }
}
