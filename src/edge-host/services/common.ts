// Shared by the host's services: the lookups every script operation starts with, the way to a
// script's own service Workers, and the wire views of host-state records.
import type {Agent} from 'undici'
import {SCRIPT_NAME_PATTERN, type AccessPolicy, type OperationSettings} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
import type {WorkerdRuntime} from '../runtime/runtime.js'
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

/** A script whose data an operator reads or writes (D1, queues): it must exist and not be retired, whose data stays on disk. */
export function requireLiveScript(state: HostState, name: string, data: string): ScriptRecord {
  const script = state.scripts.get(name)
  if (!script) throw new HostError('script_not_found', `no script ${name} on this host`)
  if (script.retiredAt !== null) throw new HostError('edge_host_script_retired', `script ${name} is retired; its ${data} stay on disk`)
  return script
}

/**
 * Runs `use` on a hold of the shard that runs `script`, whose connections reach the script's
 * service Workers (D1, queues) on their own sockets. A failure other than a HostError marks the hold
 * failed, as a request the process did not answer.
 */
export async function withScriptShard<T>(
  runtime: WorkerdRuntime,
  holdTimeoutMs: number,
  script: ScriptRecord,
  use: (dispatcher: Agent) => Promise<T>,
): Promise<T> {
  const shard = script.shard === null ? undefined : runtime.shard(script.shard)
  const lease = shard && (await shard.acquire(holdTimeoutMs, script.name))
  if (!lease) throw new HostError('host_busy', `the shard of script ${script.name} does not serve yet; retry shortly`)
  let failed = false
  try {
    if (shard!.routeOf(script.name) === undefined) throw new HostError('host_busy', `script ${script.name} is not running yet; retry shortly`)
    return await use(lease.dispatcher)
  } catch (error) {
    failed = !(error instanceof HostError)
    throw error
  } finally {
    lease.release(failed)
  }
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
