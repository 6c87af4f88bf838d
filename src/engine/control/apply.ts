// A control command as one engine call (`secret put`, `access-policy set`, `api-key rotate`, …):
// input and target are checked before anything is written; then the mutation's outbox row is
// enqueued (digests only) and leased, the mutation sent with {mutationId: row id, commandDigest},
// its receipt read back and the row settled, and the receipt acknowledged. A mutation whose outcome
// this process cannot learn is left to the control_audit lane, which settles it from the receipt.
import {randomBytes} from 'node:crypto'
import {canonicalJson, sha256Hex} from '../../canonical-json.js'
import {KitError} from '../../errors.js'
import {EDGE_HOST_FENCED, identifierSchema, MAX_SECRET_VALUE_LENGTH} from '../../protocol/management-api.js'
import {ProviderError, type AccessPolicyMode, type ControlMutation, type ControlState, type RevisionedControl} from '../../provider/types.js'
import {controlAuditDedupeKey, newId, type AuditActor, type VersionRow, type WorkerRow} from '../../store/index.js'
import {capabilitiesOf} from '../capabilities.js'
import type {Engine} from '../context.js'
import {faultPoint} from '../faults.js'
import {idsStartingWith, resolveIdPrefixOrNull} from '../id-prefix.js'
import {askedHost} from '../retry.js'
import {executionGate} from '../gates.js'
import {requireProvider} from '../provider.js'
import {
  canonicalObjectText,
  commandDigestOf,
  commandOf,
  commandSchemas,
  controlPayloadProblem,
  type ControlOperation,
  type ControlPayload,
} from './operations.js'
import {acknowledgeReceipt, settleFromReceipt} from './receipts.js'

/** What an operator asks for; revisions are read from the host, API keys generated here. */
export type ControlRequest = {[K in ControlOperation]: {operation: K} & ControlRequestFields[K]}[ControlOperation]

/** Nothing beyond the operation: revisions are read from the host, API keys generated here. */
type NoFields = Record<never, never>

/** What the operator gives for each control operation (a missing operation does not compile). */
interface ControlRequestFields {
  'access_policy.replace': {mode: AccessPolicyMode; ipAllowlist: string[]}
  'access_policy.api_key.rotate': NoFields
  'access_policy.api_key.revoke': NoFields
  'runtime_config.replace': {key: string; value: unknown}
  'runtime_config.delete': {key: string}
  'operation_settings.replace': {settings: unknown}
  'operation_settings.revoke': NoFields
  'secrets.put': {name: string; value: string}
  'secrets.delete': {name: string}
  'service_accounts.credentials.put': {serviceAccountId: string; username: string; password: string}
  'service_accounts.credentials.delete': {serviceAccountId: string}
}

export interface ControlOutcome {
  /** completed: applied and recorded; pending: left to the control_audit lane; failed: not applied. */
  state: 'completed' | 'pending' | 'failed'
  operation: ControlOperation
  departmentId: string
  workerId: string
  scriptName: string
  outboxId: string
  code: string | null
  message: string | null
  /** The host's `current` from the receipt (digests only), once completed. */
  current: Record<string, unknown> | null
  /** A revoke that revoked nothing, a delete that deleted nothing. */
  noop: boolean
  acknowledged: boolean
}

/** The Worker a control command acts on: live department, Worker not retired, a deployed release. */
export interface ControlTarget {
  departmentId: string
  worker: WorkerRow
  version: VersionRow
}

/** Runs one control command. `apiKey` is set for a rotate (shown to the operator once, stored nowhere). */
export async function applyControl(
  engine: Engine,
  input: {departmentId: string; request: ControlRequest; actor: AuditActor},
): Promise<{outcome: ControlOutcome; apiKey?: string}> {
  assertRequestShape(input.request)
  const target = await controlTarget(engine, input.departmentId)
  const request = await capableRequest(engine, target, input.request)
  const {provider, scope} = await requireProvider(engine, `run ${request.operation}`)
  const gate = await executionGate(engine, {status: 'ready', provider, scope})
  if (gate.closed) throw new KitError('gate_closed', `cannot run ${request.operation}: ${gate.message}`, EDGE_HOST_FENCED)

  const scriptName = target.worker.script_name
  const part = revisionedPart(request.operation)
  const baseRevision = part ? await hostRead(() => provider.controlRevision(scriptName, part)) : 0
  const apiKey = request.operation === 'access_policy.api_key.rotate' ? randomBytes(32).toString('base64url') : undefined
  const mutation = mutationOf(request, baseRevision, target, apiKey)
  const command = commandOf(mutation)
  const payload: ControlPayload = {
    operation: request.operation,
    command,
    commandDigest: commandDigestOf(request.operation, scriptName, command),
    actor: input.actor,
  }
  const problem = controlPayloadProblem(scriptName, payload)
  if (problem) throw new KitError('usage', problem)

  const {store, settings} = engine
  const id = newId()
  await store.outbox.enqueue({
    id,
    operation: 'control_audit',
    dedupe_key: controlAuditDedupeKey({operation: request.operation, target: commandTarget(request)}, id),
    dispatch_namespace: scope,
    company_id: target.worker.company_id,
    department_id: target.worker.department_id,
    worker_id: target.worker.id,
    version_id: target.version.id,
    script_name: scriptName,
    payload: payload as unknown as Parameters<typeof store.outbox.enqueue>[0]['payload'],
    // This process sends the mutation next; the lane leaves the row alone for the request grace.
    reserved_by: engine.owner,
  })
  const lease = await store.outbox.leaseById(id, {scope, owner: engine.owner, leaseSeconds: settings.control_audit.lease_seconds})
  if (lease.disposition !== 'acquired') throw new KitError('internal', `the control row ${id} could not be leased (${lease.disposition})`)
  const row = lease.row

  const base = {
    operation: request.operation,
    departmentId: input.departmentId,
    workerId: target.worker.id,
    scriptName,
    outboxId: id,
    current: null,
    noop: false,
    acknowledged: false,
  }
  const result = (outcome: ControlOutcome) => ({outcome, ...(apiKey && outcome.state !== 'failed' ? {apiKey} : {})})
  try {
    await provider.controlMutation(scriptName, mutation, {mutationId: id, commandDigest: payload.commandDigest})
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error
    // Refused, or never sent: nothing was applied and there will be no receipt.
    if (error.kind === 'terminal' || error.kind === 'fenced' || (error.kind === 'retryable' && error.status === undefined)) {
      await store.outbox.settle(id, row.lease_token!, {status: 'failed', errorCode: error.code, error: error.message, attempted: askedHost(error)})
      // Never sent (the host is down): exit 10 like every command that could not reach the host.
      if (error.status === undefined) throw new KitError('host_unreachable', `${error.message}; nothing was applied (outbox row ${id} failed)`, error.code)
      return result({...base, state: 'failed', code: error.code, message: error.message})
    }
    // The host may have applied it: only its receipt can tell. The lane reads it once the request
    // grace is over (a request still in flight at the host may yet apply).
    const readReceiptAt = store.clock.now() + settings.control_audit.request_grace_seconds * 1000
    await store.sweeps.releaseLease(id, row.lease_token!, {status: 'pending', errorCode: error.code, nextAttemptAt: readReceiptAt}).catch(() => false)
    return result({...base, state: 'pending', code: error.code, message: `${error.message}; the control_audit lane settles it from the host's receipt`})
  }
  faultPoint('control.after_mutation')

  const settled = await settleFromReceipt(engine, provider, row, payload)
  switch (settled.outcome) {
    case 'completed': {
      const acked = await acknowledgeReceipt(engine, provider, settled.stamp, settled.row)
      return result({
        ...base,
        state: 'completed',
        code: null,
        message: acked === 'acknowledged' ? null : 'the receipt acknowledgement is left to the control_audit lane',
        current: settled.current,
        noop: settled.noop,
        acknowledged: acked === 'acknowledged',
      })
    }
    case 'failed':
      return result({...base, state: 'failed', code: settled.code, message: settled.message})
    case 'retried':
      return result({...base, state: 'pending', code: settled.code, message: `${settled.message}; the control_audit lane retries`})
    case 'lease_lost':
      return result({...base, state: 'pending', code: null, message: 'another runner took over this control row'})
  }
}

/** A Worker's control state as the host holds it (names and digests; no secret values). */
export async function readControlState(engine: Engine, departmentId: string): Promise<{target: ControlTarget; state: ControlState}> {
  const target = await controlTarget(engine, departmentId)
  const {provider} = await requireProvider(engine, 'read the control state')
  return {target, state: await hostRead(() => provider.controlState(target.worker.script_name))}
}

export async function controlTarget(engine: Engine, departmentId: string): Promise<ControlTarget> {
  const {store} = engine
  const department = await store.tenants.getDepartment(departmentId)
  if (!department || department.deleted_at !== null) throw new KitError('not_found', `department ${departmentId} not found`)
  const worker = await store.workers.getByDepartment(departmentId)
  if (!worker) throw new KitError('not_found', `department ${departmentId} has no Worker; deploy one first`)
  if (worker.retired_at !== null) throw new KitError('not_found', `the Worker of department ${departmentId} is retired`)
  const version = worker.current_version_id ? await store.workers.getVersion(worker.current_version_id) : undefined
  if (version?.state !== 'deployed') throw new KitError('conflict', `the Worker of department ${departmentId} has no deployed release; deploy it first`)
  return {departmentId, worker, version}
}

/** One-line usage errors for input no host call could fix, before anything is read or written. */
function assertRequestShape(request: ControlRequest): void {
  const usage = (message: string): never => {
    throw new KitError('usage', message)
  }
  const identifier = (name: string) => identifierSchema.safeParse(name).success
  switch (request.operation) {
    case 'secrets.put':
    case 'secrets.delete':
      if (!identifier(request.name))
        usage(`secret name ${JSON.stringify(request.name)} must be an identifier of at most 64 characters ([A-Za-z_][A-Za-z0-9_]*)`)
      if (request.operation === 'secrets.put' && request.value.length > MAX_SECRET_VALUE_LENGTH)
        usage(`the secret value is longer than ${MAX_SECRET_VALUE_LENGTH} characters`)
      return
    case 'runtime_config.replace':
    case 'runtime_config.delete':
      if (!identifier(request.key)) usage(`runtime-config key ${JSON.stringify(request.key)} must be an identifier of at most 64 characters`)
      if (request.operation === 'runtime_config.replace') assertJsonObject(request.value, 'the runtime-config value')
      return
    case 'operation_settings.replace':
      assertJsonObject(request.settings, 'the operation settings')
      return
    case 'service_accounts.credentials.put':
      if (request.username === '' || request.username.length > 256) usage('the username must be 1–256 characters')
      if (request.password === '' || request.password.length > 4_096) usage('the password must be 1–4096 characters')
      return
    case 'access_policy.replace': {
      const checked = commandSchemas['access_policy.replace'].safeParse({mode: request.mode, ipAllowlist: request.ipAllowlist, baseRevision: 0})
      if (!checked.success) usage(`access policy: ${checked.error.issues[0]!.message}`)
      return
    }
    default:
      return
  }
}

/** A JSON object of at most 64 KiB once written canonically: what runtime config and operation settings hold. */
function assertJsonObject(value: unknown, what: string): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new KitError('usage', `${what} must be a JSON object`)
  const check = canonicalObjectText.safeParse(canonicalJson(value))
  if (!check.success) throw new KitError('usage', `${what} ${check.error.issues[0]!.message}`)
}

/**
 * Secrets need a v2.6+ release, credentials v2.9+ and a live service account of the department, named
 * by its id, its name or a unique prefix of its id: the request, with the account's id.
 */
async function capableRequest(engine: Engine, target: ControlTarget, request: ControlRequest): Promise<ControlRequest> {
  const can = capabilitiesOf(target.version.builder_policy)
  if (request.operation.startsWith('secrets.') && !can.workerSecrets) {
    throw new KitError('conflict', `the deployed release is built with ${target.version.builder_policy}, which has no Worker secrets (v2.6 or newer)`)
  }
  if (request.operation !== 'service_accounts.credentials.put' && request.operation !== 'service_accounts.credentials.delete') return request
  if (!can.serviceAccountCredentials) {
    throw new KitError(
      'conflict',
      `the deployed release is built with ${target.version.builder_policy}, which has no service-account credentials (v2.9 or newer)`,
    )
  }
  const typed = request.serviceAccountId
  const live = (await engine.store.tenants.listServiceAccounts(target.departmentId)).filter((account) => account.deleted_at === null)
  const named = live.find((account) => account.id === typed) ?? live.find((account) => account.name === typed)
  const id = named?.id ?? (await resolveIdPrefixOrNull('service account', typed, idsStartingWith(live.map((account) => account.id))))
  if (id === null) throw new KitError('not_found', `service account ${typed} not found in department ${target.departmentId} (give its name or id)`)
  return {...request, serviceAccountId: id}
}

/** What a control command acts on (a secret, a runtime-config key, an account), or null: with the operation, its kind. */
function commandTarget(request: ControlRequest): string | null {
  if ('name' in request) return request.name
  if ('key' in request) return request.key
  if ('serviceAccountId' in request) return request.serviceAccountId
  return null
}

/** Which revision an operation's baseRevision is; null for the four operations without one. */
function revisionedPart(operation: ControlOperation): RevisionedControl | null {
  if (operation.startsWith('access_policy.')) return 'access_policy'
  if (operation.startsWith('runtime_config.')) return 'runtime_config'
  if (operation.startsWith('operation_settings.')) return 'operation_settings'
  return null
}

/** A read of the host's control state; its failures as one-line kit errors. */
async function hostRead<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch (error) {
    if (error instanceof ProviderError && error.kind !== 'terminal') throw new KitError('host_unreachable', `the edge host did not answer: ${error.message}`)
    throw new KitError('host_error', `the edge host refused to show the control state: ${(error as Error).message}`)
  }
}

/** The mutation for the host; `baseRevision` is ignored by the operations without one. */
function mutationOf(request: ControlRequest, baseRevision: number, target: ControlTarget, apiKey: string | undefined): ControlMutation {
  switch (request.operation) {
    case 'access_policy.replace':
      return {operation: request.operation, mode: request.mode, ipAllowlist: request.ipAllowlist, baseRevision}
    case 'access_policy.api_key.rotate':
      return {operation: request.operation, apiKeySha256: sha256Hex(apiKey!), apiKeyLastFour: apiKey!.slice(-4), baseRevision}
    case 'access_policy.api_key.revoke':
    case 'operation_settings.revoke':
      return {operation: request.operation, baseRevision}
    case 'runtime_config.replace':
      return {operation: request.operation, key: request.key, valueJson: canonicalJson(request.value), baseRevision}
    case 'runtime_config.delete':
      return {operation: request.operation, key: request.key, baseRevision}
    case 'operation_settings.replace':
      return {operation: request.operation, releaseGeneration: target.version.release_generation, settingsJson: canonicalJson(request.settings), baseRevision}
    default:
      return request
  }
}
