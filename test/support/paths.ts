// Request targets for tests that speak the management API by hand, built from the endpoint table
// (src/protocol/endpoints.ts) so they stay what the kit sends.
import {pathOf} from '../../src/protocol/endpoint.js'
import {endpoints as e} from '../../src/protocol/endpoints.js'

export const paths = {
  identity: pathOf(e.identity, {}),
  pair: pathOf(e.pair, {}),
  inventory: pathOf(e.inventory, {}),
  listScripts: (page: {limit?: number; cursor?: string | null} = {}) => pathOf(e.listScripts, {}, page),
  script: (name: string) => pathOf(e.script, {name}),
  retire: (name: string) => pathOf(e.retire, {name}),
  purgeScriptData: (name: string) => pathOf(e.purgeScriptData, {name}),
  lockdown: (name: string) => pathOf(e.lockdown, {name}),
  accessPolicy: (name: string) => pathOf(e.accessPolicy, {name}),
  readinessProbe: (name: string, releaseGeneration: string, waitMs = 0) =>
    pathOf(e.accessPolicy, {name}, {releaseGeneration, waitMs: waitMs > 0 ? waitMs : null}),
  secrets: (name: string) => pathOf(e.secrets, {name}),
  secret: (name: string, secret: string) => pathOf(e.putSecret, {name, secret}),
  serviceAccounts: (name: string) => pathOf(e.serviceAccounts, {name}),
  serviceAccount: (name: string, id: string) => pathOf(e.putServiceAccount, {name, id}),
  controlCopy: (name: string) => pathOf(e.controlCopy, {name}),
  receipt: (mutationId: string, commandDigest: string) => pathOf(e.receipt, {mutationId}, {commandDigest}),
  receiptAck: (mutationId: string) => pathOf(e.receiptAck, {mutationId}),
  tail: (name: string) => pathOf(e.tail, {name}),
  workerActivity: pathOf(e.workerActivity, {}),
  fence: pathOf(e.fence, {}),
  fenceById: (fenceId: string) => pathOf(e.fenceById, {fenceId}),
  fenceEnd: (fenceId: string) => pathOf(e.fenceEnd, {fenceId}),
  snapshot: (fenceId: string) => pathOf(e.snapshot, {}, {fenceId}),
}
