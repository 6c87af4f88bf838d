// The provider's values from and to the management API's wire shapes: where each control mutation
// goes with the body it carries, script details and fences.
import type {z} from 'zod'
import {endpoints} from '../../protocol/endpoints.js'
import type {Endpoint} from '../../protocol/endpoint.js'
import type {Fence, ScriptDetails as WireScriptDetails} from '../../protocol/management-api.js'
import type {ControlMutation, HostFence, ScriptDetails} from '../types.js'

/** Every control mutation's endpoint takes a body and answers one. */
type ControlEndpoint = Endpoint & {request: z.ZodType; response: z.ZodType}

/** Where each control mutation goes and the body it carries (the mutation meta is added by the caller). */
export function controlRequest(scriptName: string, mutation: ControlMutation): {endpoint: ControlEndpoint; params: Record<string, string>; body: object} {
  const name = scriptName
  switch (mutation.operation) {
    case 'access_policy.replace':
      return {
        endpoint: endpoints.replaceAccessPolicy,
        params: {name},
        body: {mode: mutation.mode, baseRevision: mutation.baseRevision, ...(mutation.mode === 'teamsync_internal' ? {ipAllowlist: mutation.ipAllowlist} : {})},
      }
    case 'access_policy.api_key.rotate':
      return {
        endpoint: endpoints.rotateApiKey,
        params: {name},
        body: {apiKeySha256: mutation.apiKeySha256, apiKeyLastFour: mutation.apiKeyLastFour, baseRevision: mutation.baseRevision},
      }
    case 'access_policy.api_key.revoke':
      return {endpoint: endpoints.revokeApiKey, params: {name}, body: {baseRevision: mutation.baseRevision}}
    case 'runtime_config.replace':
      return {
        endpoint: endpoints.putRuntimeConfig,
        params: {name, key: mutation.key},
        body: {valueJson: mutation.valueJson, baseRevision: mutation.baseRevision},
      }
    case 'runtime_config.delete':
      return {endpoint: endpoints.deleteRuntimeConfig, params: {name, key: mutation.key}, body: {baseRevision: mutation.baseRevision}}
    case 'operation_settings.replace':
      return {
        endpoint: endpoints.replaceOperationSettings,
        params: {name},
        body: {releaseGeneration: mutation.releaseGeneration, settingsJson: mutation.settingsJson, baseRevision: mutation.baseRevision},
      }
    case 'operation_settings.revoke':
      return {endpoint: endpoints.revokeOperationSettings, params: {name}, body: {baseRevision: mutation.baseRevision}}
    case 'secrets.put':
      return {endpoint: endpoints.putSecret, params: {name, secret: mutation.name}, body: {value: mutation.value}}
    case 'secrets.delete':
      return {endpoint: endpoints.deleteSecret, params: {name, secret: mutation.name}, body: {}}
    case 'service_accounts.credentials.put':
      return {
        endpoint: endpoints.putServiceAccount,
        params: {name, id: mutation.serviceAccountId},
        body: {username: mutation.username, password: mutation.password},
      }
    case 'service_accounts.credentials.delete':
      return {endpoint: endpoints.deleteServiceAccount, params: {name, id: mutation.serviceAccountId}, body: {}}
  }
}

export function detailsOf(wire: WireScriptDetails): ScriptDetails {
  return {
    scriptName: wire.name,
    releaseGeneration: wire.releaseGeneration ?? '',
    builderPolicy: wire.builderPolicy ?? '',
    state: wire.state,
    moduleDigests: Object.fromEntries(wire.modules.map((module) => [module.name, module.sha256])),
    tags: wire.tags,
    split: wire.split,
  }
}

export function fenceOf(wire: Fence): HostFence {
  return {
    fenceId: wire.fenceId,
    reason: wire.reason,
    startedAt: Date.parse(wire.startedAt),
    expiresAt: Date.parse(wire.expiresAt),
    liftedAt: wire.liftedAt === null ? null : Date.parse(wire.liftedAt),
    liftReason: wire.liftReason,
  }
}
