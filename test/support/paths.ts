// Request targets for tests that speak the management API by hand, built from the endpoint table
// (src/protocol/endpoints.ts) so they stay what the kit sends.
import {endpoints as e, pathOf} from '../../src/protocol/endpoints.js'

export const paths = {
  livez: pathOf(e.livez, {}),
  readyz: pathOf(e.readyz, {}),
  metrics: pathOf(e.metrics, {}),
  identity: pathOf(e.identity, {}),
  pair: pathOf(e.pair, {}),
  inventory: pathOf(e.inventory, {}),
  scripts: pathOf(e.listScripts, {}),
  listScripts: (page: {limit?: number; cursor?: string | null} = {}) => pathOf(e.listScripts, {}, page),
  script: (name: string) => pathOf(e.script, {name}),
  retire: (name: string) => pathOf(e.retire, {name}),
  lockdown: (name: string) => pathOf(e.lockdown, {name}),
  accessPolicy: (name: string) => pathOf(e.accessPolicy, {name}),
  readinessProbe: (name: string, releaseGeneration: string, waitMs = 0) =>
    pathOf(e.accessPolicy, {name}, {releaseGeneration, waitMs: waitMs > 0 ? waitMs : null}),
  secrets: (name: string) => pathOf(e.secrets, {name}),
  secret: (name: string, secret: string) => pathOf(e.putSecret, {name, secret}),
  serviceAccounts: (name: string) => pathOf(e.serviceAccounts, {name}),
  serviceAccount: (name: string, id: string) => pathOf(e.putServiceAccount, {name, id}),
  apiKeyRotate: (name: string) => pathOf(e.rotateApiKey, {name}),
  apiKeyRevoke: (name: string) => pathOf(e.revokeApiKey, {name}),
  runtimeConfig: (name: string) => pathOf(e.runtimeConfig, {name}),
  runtimeConfigEntry: (name: string, key: string) => pathOf(e.putRuntimeConfig, {name, key}),
  operationSettings: (name: string) => pathOf(e.operationSettings, {name}),
  operationSettingsRevoke: (name: string) => pathOf(e.revokeOperationSettings, {name}),
  receipt: (mutationId: string, commandDigest: string) => pathOf(e.receipt, {mutationId}, {commandDigest}),
  receiptAck: (mutationId: string) => pathOf(e.receiptAck, {mutationId}),
  fence: pathOf(e.fence, {}),
  fenceById: (fenceId: string) => pathOf(e.fenceById, {fenceId}),
  fenceEnd: (fenceId: string) => pathOf(e.fenceEnd, {fenceId}),
  snapshot: (fenceId: string) => pathOf(e.snapshot, {}, {fenceId}),
  tail: (name: string) => pathOf(e.tail, {name}),
  workerActivity: pathOf(e.workerActivity, {}),
}
