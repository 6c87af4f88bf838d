// The on-prem provider: an undici client for the edge host's management API (src/protocol).
// Every request is signed; redirects are never followed; connect and read timeouts come from
// settings. Failures are classified once, here, into the engine's ProviderError kinds.
import {createHash} from 'node:crypto'
import {open, rm} from 'node:fs/promises'
import {pipeline} from 'node:stream/promises'
import {Agent, errors as undiciErrors, request, type Dispatcher} from 'undici'
import {
  accessPolicySchema,
  errorStatus,
  operationSettingsSchema,
  runtimeConfigListSchema,
  secretListSchema,
  serviceAccountListSchema,
  fenceSchema,
  fenceStatusSchema,
  identitySchema,
  inventorySchema,
  paths,
  READINESS_WAIT_MAX_MS,
  scriptDetailsSchema,
  scriptListSchema,
  type Binding,
  type Fence,
  type ScriptDetails as WireScriptDetails,
  type UploadScript,
} from '../../protocol/management-api.js'
import {signRequest} from '../../protocol/signing.js'
import {tailEventSchema, workerActivitySchema, type TailEvent, type WorkerActivity} from '../../protocol/tail.js'
import {
  ProviderError,
  type AccessPolicy,
  type ControlMutation,
  type ControlState,
  type EdgeProvider,
  type MutationMeta,
  type RevisionedControl,
  type HostDescription,
  type HostFence,
  type HostInventory,
  type ScriptDetails,
  type ScriptListPage,
  type UploadScriptInput,
  type WorkerBinding,
} from '../types.js'
import type {z} from 'zod'
import {parseStrictJson} from '../../util/strict-json.js'

export interface OnPremProviderOptions {
  /** The management listener, e.g. http://127.0.0.1:8788 */
  baseUrl: string
  scope: string
  /** The pairing secret (64 hex). Never logged, never part of an error message. */
  secret: string
  connectTimeoutMs: number
  readTimeoutMs: number
}

/** A tail stream silent for this long (heartbeats are every 5 s) is taken for dead. */
const TAIL_SILENCE_LIMIT_MS = 20_000

/** Codes of host answers that end a request for good regardless of the HTTP status family. */
const TERMINAL_CODES = new Set(['edge_host_script_retired'])

export class OnPremProvider implements EdgeProvider {
  readonly scope: string
  private readonly dispatcher: Dispatcher
  private readonly origin: string

  constructor(private readonly options: OnPremProviderOptions) {
    this.scope = options.scope
    this.origin = options.baseUrl.replace(/\/+$/, '')
    this.dispatcher = new Agent({
      connectTimeout: options.connectTimeoutMs,
      headersTimeout: options.readTimeoutMs,
      bodyTimeout: options.readTimeoutMs,
    })
  }

  async describeHost(signal?: AbortSignal): Promise<HostDescription> {
    const identity = await this.call('GET', paths.identity, {schema: identitySchema, signal, unsigned: true})
    return {publicUrl: identity.publicUrl, baseDomain: identity.baseDomain}
  }

  async uploadScript(input: UploadScriptInput, signal?: AbortSignal): Promise<ScriptDetails> {
    const body: UploadScript = {
      releaseGeneration: input.releaseGeneration,
      mainModule: input.mainModule,
      compatibilityDate: input.compatibilityDate,
      compatibilityFlags: input.compatibilityFlags,
      builderPolicy: input.builderPolicy,
      tags: input.tags,
      modules: input.modules.map((module) => ({name: module.name, type: module.type, contentBase64: Buffer.from(module.content).toString('base64')})),
      bindings: input.bindings.map(wireBindingOf),
    }
    return detailsOf(await this.call('PUT', paths.script(input.scriptName), {body, schema: scriptDetailsSchema, signal}))
  }

  async getScript(scriptName: string, signal?: AbortSignal): Promise<ScriptDetails | null> {
    const details = await this.call('GET', paths.script(scriptName), {schema: scriptDetailsSchema, signal, absentOn: 'script_not_found'})
    return details && detailsOf(details)
  }

  async probeReadiness(scriptName: string, releaseGeneration: string, {waitMs = 0, signal}: {waitMs?: number; signal?: AbortSignal} = {}): Promise<boolean> {
    // The host's answer must come well within the read timeout, which also bounds a waiting probe.
    const wait = Math.floor(Math.min(waitMs, READINESS_WAIT_MAX_MS, this.options.readTimeoutMs / 2))
    const policy = await this.call('GET', paths.readinessProbe(scriptName, releaseGeneration, wait), {signal, absentOn: 'script_not_ready'})
    return policy !== null
  }

  async listScripts(cursor: string | null, signal?: AbortSignal): Promise<ScriptListPage> {
    const page = await this.call('GET', paths.listScripts({cursor}), {schema: scriptListSchema, signal})
    return {
      scripts: page.scripts.map((script) => ({scriptName: script.name, state: script.state, tags: script.tags, releaseGeneration: script.releaseGeneration})),
      nextCursor: page.nextCursor,
    }
  }

  async lockdownScript(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.call('POST', paths.lockdown(scriptName), {body: {}, signal})
  }

  async replaceAccessPolicy(scriptName: string, policy: AccessPolicy, signal?: AbortSignal): Promise<void> {
    const body = {
      mode: policy.mode,
      ...(policy.mode === 'api_key' ? {apiKeySha256: policy.apiKeySha256 ?? undefined} : {}),
      ...(policy.mode === 'teamsync_internal' ? {ipAllowlist: policy.ipAllowlist} : {}),
    }
    await this.call('PUT', paths.accessPolicy(scriptName), {body, signal})
  }

  async controlMutation(scriptName: string, mutation: ControlMutation, meta: MutationMeta, signal?: AbortSignal): Promise<unknown> {
    const [method, target, body] = controlRequest(scriptName, mutation)
    return this.call(method, target, {body: {...body, ...meta}, signal})
  }

  async getReceipt(meta: MutationMeta, signal?: AbortSignal): Promise<unknown> {
    return this.call('GET', paths.receipt(meta.mutationId, meta.commandDigest), {signal, absentOn: 'receipt_not_found'})
  }

  async acknowledgeReceipt(mutationId: string, signal?: AbortSignal): Promise<unknown> {
    return this.call('POST', paths.receiptAck(mutationId), {body: {}, signal})
  }

  async controlState(scriptName: string, signal?: AbortSignal): Promise<ControlState> {
    const [accessPolicy, secrets, serviceAccounts, runtimeConfig, operationSettings] = await Promise.all([
      this.call('GET', paths.accessPolicy(scriptName), {schema: accessPolicySchema, signal}),
      this.call('GET', paths.secrets(scriptName), {schema: secretListSchema, signal}),
      this.call('GET', paths.serviceAccounts(scriptName), {schema: serviceAccountListSchema, signal}),
      this.call('GET', paths.runtimeConfig(scriptName), {schema: runtimeConfigListSchema, signal}),
      this.call('GET', paths.operationSettings(scriptName), {schema: operationSettingsSchema, signal}),
    ])
    return {accessPolicy, secrets: secrets.secrets, serviceAccounts: serviceAccounts.serviceAccounts, runtimeConfig, operationSettings}
  }

  async controlRevision(scriptName: string, part: RevisionedControl, signal?: AbortSignal): Promise<number> {
    switch (part) {
      case 'access_policy':
        return (await this.call('GET', paths.accessPolicy(scriptName), {schema: accessPolicySchema, signal})).revision
      case 'runtime_config':
        return (await this.call('GET', paths.runtimeConfig(scriptName), {schema: runtimeConfigListSchema, signal})).revision
      case 'operation_settings':
        return (await this.call('GET', paths.operationSettings(scriptName), {schema: operationSettingsSchema, signal})).revision
    }
  }

  async purgeSecrets(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.call('DELETE', paths.secrets(scriptName), {body: {}, signal})
  }

  async purgeCredentials(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.call('DELETE', paths.serviceAccounts(scriptName), {body: {}, signal})
  }

  async retireScript(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.call('POST', paths.retire(scriptName), {body: {}, signal})
  }

  async beginFence(input: {fenceId: string; ttlSeconds: number; reason: string}, signal?: AbortSignal): Promise<HostFence> {
    return fenceOf(await this.call('POST', paths.fence, {body: input, schema: fenceSchema, signal}))
  }

  async endFence(fenceId: string, signal?: AbortSignal): Promise<HostFence> {
    return fenceOf(await this.call('POST', paths.fenceEnd(fenceId), {body: {}, schema: fenceSchema, signal}))
  }

  async getFence(fenceId: string, signal?: AbortSignal): Promise<HostFence | null> {
    const fence = await this.call('GET', paths.fenceById(fenceId), {schema: fenceSchema, signal, absentOn: 'fence_not_found'})
    return fence && fenceOf(fence)
  }

  async fenceStatus(signal?: AbortSignal): Promise<{active: HostFence | null; recent: HostFence[]}> {
    const status = await this.call('GET', paths.fence, {schema: fenceStatusSchema, signal})
    return {active: status.active && fenceOf(status.active), recent: status.recent.map(fenceOf)}
  }

  async inventory(signal?: AbortSignal): Promise<HostInventory> {
    const inventory = await this.call('GET', paths.inventory, {schema: inventorySchema, signal})
    return {
      scripts: inventory.scripts.map((script) => ({scriptName: script.name, state: script.state, tags: [], releaseGeneration: script.releaseGeneration})),
      activeFence: inventory.fence && fenceOf(inventory.fence),
      shards: inventory.shards,
      quarantined: inventory.quarantined,
    }
  }

  async downloadSnapshot(fenceId: string, file: string, signal?: AbortSignal): Promise<{size: number; sha256: string}> {
    const target = paths.snapshot(fenceId)
    const headers = {accept: 'application/x-tar', ...signRequest({secret: this.options.secret, method: 'GET', target})}
    let response: Dispatcher.ResponseData
    try {
      response = await request(`${this.origin}${target}`, {method: 'GET', headers, dispatcher: this.dispatcher, signal})
    } catch (error) {
      throw transportError(error, 'GET', target)
    }
    if (response.statusCode !== 200) {
      const text = await response.body.text().catch(() => '')
      const {code, message} = errorBodyOf(text, response.statusCode)
      throw httpError(response.statusCode, code, `GET ${target}: edge host answered ${response.statusCode} ${code}${message ? `: ${message}` : ''}`)
    }
    const handle = await open(file, 'wx', 0o600).catch(async (error: unknown) => {
      await response.body.dump().catch(() => {})
      throw error
    })
    const output = handle.createWriteStream()
    let writeFailed = false
    output.once('error', () => (writeFailed = true))
    // Hashed on the way to disk: the body is never held in memory whole.
    const hash = createHash('sha256')
    let size = 0
    try {
      await pipeline(
        response.body,
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            size += chunk.length
            hash.update(chunk)
            yield chunk
          }
        },
        output,
      )
    } catch (error) {
      await rm(file, {force: true})
      throw writeFailed ? error : transportError(error, 'GET', target)
    }
    return {size, sha256: hash.digest('hex')}
  }

  async *tail(scriptName: string, signal: AbortSignal): AsyncIterable<TailEvent> {
    const target = paths.tail(scriptName)
    const headers = {accept: 'application/x-ndjson', ...signRequest({secret: this.options.secret, method: 'GET', target})}
    let response: Dispatcher.ResponseData
    try {
      // The host sends a blank line every few seconds: a stream silent for longer is dead.
      response = await request(`${this.origin}${target}`, {method: 'GET', headers, dispatcher: this.dispatcher, signal, bodyTimeout: TAIL_SILENCE_LIMIT_MS})
    } catch (error) {
      if (signal.aborted) return
      throw transportError(error, 'GET', target)
    }
    if (response.statusCode !== 200) {
      const text = await response.body.text().catch(() => '')
      const {code, message} = errorBodyOf(text, response.statusCode)
      throw httpError(response.statusCode, code, `GET ${target}: edge host answered ${response.statusCode} ${code}${message ? `: ${message}` : ''}`)
    }
    let pending = ''
    try {
      for await (const chunk of response.body) {
        pending += (chunk as Buffer).toString('utf8')
        const lines = pending.split('\n')
        pending = lines.pop()!
        for (const line of lines) {
          if (line.trim() === '') continue
          const parsed = tailEventSchema.safeParse(parseJson(line, 'GET', target, 200))
          if (!parsed.success)
            throw new ProviderError('retryable', 'edge_host_bad_response', `GET ${target}: the edge host sent an event this kit does not understand`, 200)
          yield parsed.data
        }
      }
    } catch (error) {
      if (signal.aborted) return
      throw error instanceof ProviderError ? error : transportError(error, 'GET', target)
    }
    if (!signal.aborted) throw new ProviderError('retryable', 'edge_host_no_answer', `GET ${target}: the edge host ended the stream`)
  }

  workerActivity(signal?: AbortSignal): Promise<WorkerActivity> {
    return this.call('GET', paths.workerActivity, {schema: workerActivitySchema, signal})
  }

  /**
   * One signed request. `absentOn`: the error code that means "no such thing" (→ null instead of an
   * error). A request that never reached the host is `retryable`; one that may have been applied
   * (read timeout, connection cut after sending) is `ambiguous`.
   */
  private async call<S extends z.ZodType = z.ZodUnknown, A extends string | undefined = undefined>(
    method: 'GET' | 'PUT' | 'POST' | 'DELETE',
    target: string,
    options: {body?: unknown; schema?: S; signal?: AbortSignal; absentOn?: A; unsigned?: boolean},
  ): Promise<A extends string ? z.infer<S> | null : z.infer<S>> {
    const body = options.body === undefined ? undefined : JSON.stringify(options.body)
    const headers: Record<string, string> = {accept: 'application/json'}
    if (body !== undefined) headers['content-type'] = 'application/json'
    if (!options.unsigned) Object.assign(headers, signRequest({secret: this.options.secret, method, target, body}))
    let response: Dispatcher.ResponseData
    try {
      response = await request(`${this.origin}${target}`, {method, headers, body, dispatcher: this.dispatcher, signal: options.signal})
    } catch (error) {
      throw transportError(error, method, target)
    }
    const text = await response.body.text().catch((error: unknown) => {
      throw transportError(error, method, target)
    })
    const status = response.statusCode
    if (status >= 200 && status < 300) {
      const data: unknown = text === '' ? null : parseJson(text, method, target, status)
      if (!options.schema) return data as never
      const parsed = options.schema.safeParse(data)
      if (!parsed.success)
        throw new ProviderError(
          'retryable',
          'edge_host_bad_response',
          `${method} ${target}: the edge host answered a body this kit does not understand`,
          status,
        )
      return parsed.data as never
    }
    const {code, message} = errorBodyOf(text, status)
    if (options.absentOn && code === options.absentOn) return null as never
    throw httpError(status, code, `${method} ${target}: edge host answered ${status} ${code}${message ? `: ${message}` : ''}`)
  }
}

/** Where each control mutation goes and the body it carries (the mutation meta is added by the caller). */
function controlRequest(scriptName: string, mutation: ControlMutation): ['PUT' | 'POST' | 'DELETE', string, Record<string, unknown>] {
  switch (mutation.operation) {
    case 'access_policy.replace':
      return [
        'PUT',
        paths.accessPolicy(scriptName),
        {mode: mutation.mode, baseRevision: mutation.baseRevision, ...(mutation.mode === 'teamsync_internal' ? {ipAllowlist: mutation.ipAllowlist} : {})},
      ]
    case 'access_policy.api_key.rotate':
      return [
        'POST',
        paths.apiKeyRotate(scriptName),
        {apiKeySha256: mutation.apiKeySha256, apiKeyLastFour: mutation.apiKeyLastFour, baseRevision: mutation.baseRevision},
      ]
    case 'access_policy.api_key.revoke':
      return ['POST', paths.apiKeyRevoke(scriptName), {baseRevision: mutation.baseRevision}]
    case 'runtime_config.replace':
      return ['PUT', paths.runtimeConfigEntry(scriptName, mutation.key), {valueJson: mutation.valueJson, baseRevision: mutation.baseRevision}]
    case 'runtime_config.delete':
      return ['DELETE', paths.runtimeConfigEntry(scriptName, mutation.key), {baseRevision: mutation.baseRevision}]
    case 'operation_settings.replace':
      return [
        'PUT',
        paths.operationSettings(scriptName),
        {releaseGeneration: mutation.releaseGeneration, settingsJson: mutation.settingsJson, baseRevision: mutation.baseRevision},
      ]
    case 'operation_settings.revoke':
      return ['POST', paths.operationSettingsRevoke(scriptName), {baseRevision: mutation.baseRevision}]
    case 'secrets.put':
      return ['PUT', paths.secret(scriptName, mutation.name), {value: mutation.value}]
    case 'secrets.delete':
      return ['DELETE', paths.secret(scriptName, mutation.name), {}]
    case 'service_accounts.credentials.put':
      return ['PUT', paths.serviceAccount(scriptName, mutation.serviceAccountId), {username: mutation.username, password: mutation.password}]
    case 'service_accounts.credentials.delete':
      return ['DELETE', paths.serviceAccount(scriptName, mutation.serviceAccountId), {}]
  }
}

function httpError(status: number, code: string, message: string): ProviderError {
  if (code === 'edge_host_fenced') return new ProviderError('fenced', code, message, status)
  if (TERMINAL_CODES.has(code)) return new ProviderError('terminal', code, message, status)
  if (status === 429 || status >= 500) return new ProviderError('retryable', status === 429 ? 'edge_host_rate_limited' : 'edge_host_5xx', message, status)
  if (status === 401) return new ProviderError('terminal', code === 'edge_host_unpaired' ? code : 'edge_host_unauthorized', message, status)
  if (status >= 300 && status < 400) return new ProviderError('terminal', 'edge_host_redirect', `${message} (redirects are not followed)`, status)
  return new ProviderError('terminal', code in errorStatus ? `edge_host_${code}` : 'edge_host_rejected', message, status)
}

/** Errors raised before any byte was sent cannot have changed anything; the rest may have. */
function transportError(error: unknown, method: string, target: string): ProviderError {
  const code = (error as {code?: string}).code ?? ''
  const where = `${method} ${target}`
  if (error instanceof undiciErrors.ConnectTimeoutError || ['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(code)) {
    return new ProviderError('retryable', 'edge_host_unreachable', `${where}: edge host unreachable (${code || 'connect timeout'})`)
  }
  const detail =
    error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError ? 'read timeout' : code || (error as Error).name
  return new ProviderError('ambiguous', 'edge_host_no_answer', `${where}: no complete answer from the edge host (${detail})`)
}

function parseJson(text: string, method: string, target: string, status: number): unknown {
  try {
    return parseStrictJson(text)
  } catch {
    throw new ProviderError('retryable', 'edge_host_bad_response', `${method} ${target}: the edge host answered malformed JSON`, status)
  }
}

function errorBodyOf(text: string, status: number): {code: string; message: string} {
  try {
    const body = parseStrictJson(text) as {code?: unknown; message?: unknown}
    if (typeof body.code === 'string') return {code: body.code, message: typeof body.message === 'string' ? body.message : ''}
  } catch {
    // Not our host's error shape (a proxy, a crash page): fall back to the status.
  }
  return {code: `http_${status}`, message: ''}
}

export function wireBindingOf(binding: WorkerBinding): Binding {
  switch (binding.type) {
    case 'text':
      return {type: 'plain_text', name: binding.name, text: binding.text}
    case 'json':
      return {type: 'json', name: binding.name, json: binding.json} as Binding
    case 'durable_object':
      return {type: 'durable_object_namespace', name: binding.name, className: binding.className}
    case 'service':
      return {type: 'service', name: binding.name, script: binding.scriptName}
  }
}

function detailsOf(wire: WireScriptDetails): ScriptDetails {
  return {
    scriptName: wire.name,
    releaseGeneration: wire.releaseGeneration ?? '',
    builderPolicy: wire.builderPolicy ?? '',
    state: wire.state,
    moduleDigests: Object.fromEntries(wire.modules.map((module) => [module.name, module.sha256])),
    tags: wire.tags,
  }
}

function fenceOf(wire: Fence): HostFence {
  return {
    fenceId: wire.fenceId,
    reason: wire.reason,
    startedAt: Date.parse(wire.startedAt),
    expiresAt: Date.parse(wire.expiresAt),
    liftedAt: wire.liftedAt === null ? null : Date.parse(wire.liftedAt),
    liftReason: wire.liftReason,
  }
}
