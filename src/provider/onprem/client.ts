// The on-prem provider: an undici client for the edge host's management API, calling by the
// endpoint table (src/protocol/endpoints.ts), which says each call's path, whether it is signed
// and what its answer must look like. Redirects are never followed; connect and read timeouts come
// from settings. Failures are filed into the engine's ProviderError kinds by ./failures.ts.
import {createHash} from 'node:crypto'
import {open, rm} from 'node:fs/promises'
import {pipeline} from 'node:stream/promises'
import {Agent, request as undiciRequest, type Dispatcher} from 'undici'
import type {z} from 'zod'
import {
  answerContentTypes,
  endpoints,
  pathOf,
  type Endpoint,
  type PathParams,
  type QueryParams,
  type RequestBody,
  type ResponseBody,
} from '../../protocol/endpoints.js'
import {READINESS_WAIT_MAX_MS, type ErrorCode, type Fence, type ScriptDetails as WireScriptDetails, type UploadScript} from '../../protocol/management-api.js'
import {signRequest} from '../../protocol/signing.js'
import {wireBindingOf} from '../../protocol/worker-bindings.js'
import type {TailLine, WorkerActivity} from '../../protocol/tail.js'
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
  type HostTarget,
} from '../types.js'
import {errorBodyOf, httpError, parseJson, transportError} from './failures.js'

/** A tail stream silent for this long (heartbeats are every 5 s) is taken for dead. */
const TAIL_SILENCE_LIMIT_MS = 20_000

export class OnPremProvider implements EdgeProvider {
  readonly scope: string
  private readonly dispatcher: Dispatcher
  private readonly origin: string

  constructor(private readonly options: HostTarget) {
    this.scope = options.scope
    this.origin = options.baseUrl.replace(/\/+$/, '')
    this.dispatcher = new Agent({
      connectTimeout: options.connectTimeoutMs,
      headersTimeout: options.readTimeoutMs,
      bodyTimeout: options.readTimeoutMs,
    })
  }

  async describeHost(signal?: AbortSignal): Promise<HostDescription> {
    const identity = await this.call(endpoints.identity, {}, signal)
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
      department: input.department,
      modules: input.modules.map((module) => ({name: module.name, type: module.type, contentBase64: Buffer.from(module.content).toString('base64')})),
      bindings: input.bindings.map(wireBindingOf),
      assets: input.assets,
    }
    return detailsOf(await this.call(endpoints.uploadScript, {params: {name: input.scriptName}, body}, signal))
  }

  async missingAssets(hashes: string[], signal?: AbortSignal): Promise<string[]> {
    return (await this.call(endpoints.missingAssets, {body: {hashes}}, signal)).missing
  }

  async putAssets(files: Array<{sha256: string; content: Uint8Array}>, signal?: AbortSignal): Promise<void> {
    const body = {files: files.map((file) => ({sha256: file.sha256, contentBase64: Buffer.from(file.content).toString('base64')}))}
    await this.call(endpoints.putAssets, {body}, signal)
  }

  async getScript(scriptName: string, signal?: AbortSignal): Promise<ScriptDetails | null> {
    const details = await this.find(endpoints.script, {params: {name: scriptName}}, 'script_not_found', signal)
    return details && detailsOf(details)
  }

  async probeReadiness(scriptName: string, releaseGeneration: string, {waitMs = 0, signal}: {waitMs?: number; signal?: AbortSignal} = {}): Promise<boolean> {
    // The host's answer must come well within the read timeout, which also bounds a waiting probe.
    const wait = Math.floor(Math.min(waitMs, READINESS_WAIT_MAX_MS, this.options.readTimeoutMs / 2))
    const query = {releaseGeneration, waitMs: wait > 0 ? wait : null}
    return (await this.find(endpoints.accessPolicy, {params: {name: scriptName}, query}, 'script_not_ready', signal)) !== null
  }

  async listScripts(cursor: string | null, signal?: AbortSignal): Promise<ScriptListPage> {
    const page = await this.call(endpoints.listScripts, {query: {cursor}}, signal)
    return {
      scripts: page.scripts.map((script) => ({scriptName: script.name, state: script.state, tags: script.tags, releaseGeneration: script.releaseGeneration})),
      nextCursor: page.nextCursor,
    }
  }

  async lockdownScript(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.call(endpoints.lockdown, {params: {name: scriptName}}, signal)
  }

  async replaceAccessPolicy(scriptName: string, policy: AccessPolicy, signal?: AbortSignal): Promise<void> {
    const body = {
      mode: policy.mode,
      ...(policy.mode === 'api_key' ? {apiKeySha256: policy.apiKeySha256 ?? undefined} : {}),
      ...(policy.mode === 'teamsync_internal' ? {ipAllowlist: policy.ipAllowlist} : {}),
    }
    await this.call(endpoints.replaceAccessPolicy, {params: {name: scriptName}, body}, signal)
  }

  async controlMutation(scriptName: string, mutation: ControlMutation, meta: MutationMeta, signal?: AbortSignal): Promise<unknown> {
    const {endpoint, params, body} = controlRequest(scriptName, mutation)
    return this.call(endpoint, {params, body: {...body, ...meta}}, signal)
  }

  // Receipts and their acknowledgement are checked by the engine itself (engine/control/receipts.ts),
  // which files a malformed one under its own codes: they are handed over as the host sent them.
  async getReceipt(meta: MutationMeta, signal?: AbortSignal): Promise<unknown> {
    const request = {params: {mutationId: meta.mutationId}, query: {commandDigest: meta.commandDigest}}
    return (await this.send(endpoints.receipt, request, {signal, absentOn: 'receipt_not_found'}))?.data ?? null
  }

  async acknowledgeReceipt(mutationId: string, signal?: AbortSignal): Promise<unknown> {
    return (await this.send(endpoints.receiptAck, {params: {mutationId}}, {signal}))?.data ?? null
  }

  async controlState(scriptName: string, signal?: AbortSignal): Promise<ControlState> {
    const params = {name: scriptName}
    const [accessPolicy, secrets, serviceAccounts, runtimeConfig, operationSettings] = await Promise.all([
      this.call(endpoints.accessPolicy, {params}, signal),
      this.call(endpoints.secrets, {params}, signal),
      this.call(endpoints.serviceAccounts, {params}, signal),
      this.call(endpoints.runtimeConfig, {params}, signal),
      this.call(endpoints.operationSettings, {params}, signal),
    ])
    return {accessPolicy, secrets: secrets.secrets, serviceAccounts: serviceAccounts.serviceAccounts, runtimeConfig, operationSettings}
  }

  async controlRevision(scriptName: string, part: RevisionedControl, signal?: AbortSignal): Promise<number> {
    const params = {name: scriptName}
    switch (part) {
      case 'access_policy':
        return (await this.call(endpoints.accessPolicy, {params}, signal)).revision
      case 'runtime_config':
        return (await this.call(endpoints.runtimeConfig, {params}, signal)).revision
      case 'operation_settings':
        return (await this.call(endpoints.operationSettings, {params}, signal)).revision
    }
  }

  async purgeSecrets(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.call(endpoints.purgeSecrets, {params: {name: scriptName}}, signal)
  }

  async purgeCredentials(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.call(endpoints.purgeServiceAccounts, {params: {name: scriptName}}, signal)
  }

  async retireScript(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.call(endpoints.retire, {params: {name: scriptName}}, signal)
  }

  async beginFence(input: {fenceId: string; ttlSeconds: number; reason: string}, signal?: AbortSignal): Promise<HostFence> {
    return fenceOf(await this.call(endpoints.beginFence, {body: input}, signal))
  }

  async endFence(fenceId: string, signal?: AbortSignal): Promise<HostFence> {
    return fenceOf(await this.call(endpoints.fenceEnd, {params: {fenceId}}, signal))
  }

  async getFence(fenceId: string, signal?: AbortSignal): Promise<HostFence | null> {
    const fence = await this.find(endpoints.fenceById, {params: {fenceId}}, 'fence_not_found', signal)
    return fence && fenceOf(fence)
  }

  async fenceStatus(signal?: AbortSignal): Promise<{active: HostFence | null; recent: HostFence[]}> {
    const status = await this.call(endpoints.fence, {}, signal)
    return {active: status.active && fenceOf(status.active), recent: status.recent.map(fenceOf)}
  }

  async inventory(signal?: AbortSignal): Promise<HostInventory> {
    const inventory = await this.call(endpoints.inventory, {}, signal)
    return {
      scripts: inventory.scripts.map((script) => ({scriptName: script.name, state: script.state, tags: [], releaseGeneration: script.releaseGeneration})),
      activeFence: inventory.fence && fenceOf(inventory.fence),
      shards: inventory.shards,
      quarantined: inventory.quarantined,
    }
  }

  async downloadSnapshot(fenceId: string, file: string, signal?: AbortSignal): Promise<{size: number; sha256: string}> {
    const {response, method, target} = await this.open(endpoints.snapshot, {query: {fenceId}}, {signal})
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
      throw writeFailed ? error : transportError(error, method, target)
    }
    return {size, sha256: hash.digest('hex')}
  }

  async *tail(scriptName: string, signal: AbortSignal): AsyncIterable<TailLine> {
    let opened: Opened
    try {
      // The host sends a blank line every few seconds: a stream silent for longer is dead.
      opened = await this.open(endpoints.tail, {params: {name: scriptName}}, {signal, bodyTimeout: TAIL_SILENCE_LIMIT_MS})
    } catch (error) {
      if (signal.aborted) return
      throw error
    }
    const {response, method, target} = opened
    let pending = ''
    try {
      for await (const chunk of response.body) {
        pending += (chunk as Buffer).toString('utf8')
        const lines = pending.split('\n')
        pending = lines.pop()!
        for (const line of lines) {
          if (line.trim() === '') continue
          const parsed = endpoints.tail.response.safeParse(parseJson(line, method, target, 200))
          if (!parsed.success)
            throw new ProviderError('retryable', 'edge_host_bad_response', `${method} ${target}: the edge host sent an event this kit does not understand`, 200)
          yield parsed.data
        }
      }
    } catch (error) {
      if (signal.aborted) return
      throw error instanceof ProviderError ? error : transportError(error, method, target)
    }
    if (!signal.aborted) throw new ProviderError('retryable', 'edge_host_no_answer', `${method} ${target}: the edge host ended the stream`)
  }

  workerActivity(signal?: AbortSignal): Promise<WorkerActivity> {
    return this.call(endpoints.workerActivity, {}, signal)
  }

  /** One call whose 2xx answer must match the endpoint's response schema. */
  private async call<E extends Endpoint & {response: z.ZodType}>(endpoint: E, request: CallRequest<E>, signal?: AbortSignal): Promise<ResponseBody<E>> {
    const answer = await this.send(endpoint, request, {signal})
    return checked(endpoint, answer!)
  }

  /** Like call, but the error code `absentOn` ("no such thing") answers null instead of failing. */
  private async find<E extends Endpoint & {response: z.ZodType}>(
    endpoint: E,
    request: CallRequest<E>,
    absentOn: ErrorCode,
    signal?: AbortSignal,
  ): Promise<ResponseBody<E> | null> {
    const answer = await this.send(endpoint, request, {signal, absentOn})
    return answer && checked(endpoint, answer)
  }

  /**
   * One request and its JSON answer, unchecked; null when the host answered `absentOn`. A request
   * that never reached the host is `retryable`; one that may have been applied (read timeout,
   * connection cut after sending) is `ambiguous`.
   */
  private async send<E extends Endpoint>(endpoint: E, request: CallRequest<E>, options: {signal?: AbortSignal; absentOn?: ErrorCode}): Promise<Answer | null> {
    const opened = await this.open(endpoint, request, {signal: options.signal, absentOn: options.absentOn})
    if (opened.response === null) return null
    const {response, method, target} = opened
    const text = await response.body.text().catch((error: unknown) => {
      throw transportError(error, method, target)
    })
    const status = response.statusCode
    return {method, target, status, data: text === '' ? null : parseJson(text, method, target, status)}
  }

  /**
   * Sends the request (signed unless the table says otherwise; every call but a GET carries a JSON
   * body, `{}` when it has nothing to say) and returns a 2xx answer with its body unread. An error
   * answer becomes a ProviderError, or null for `absentOn`.
   */
  private async open<E extends Endpoint, A extends ErrorCode | undefined = undefined>(
    endpoint: E,
    request: CallRequest<E>,
    options: {signal?: AbortSignal; bodyTimeout?: number; absentOn?: A},
  ): Promise<A extends ErrorCode ? Opened | {response: null} : Opened> {
    const {params = {}, query, body} = request as {params?: Record<string, string>; query?: Record<string, string | number | null>; body?: unknown}
    const {method} = endpoint
    const target = pathOf(endpoint as Endpoint, params, query)
    const payload = method === 'GET' ? undefined : JSON.stringify(body ?? {})
    const headers: Record<string, string> = {accept: answerContentTypes[endpoint.answer as 'json' | 'ndjson' | 'tar']}
    if (payload !== undefined) headers['content-type'] = 'application/json'
    if (endpoint.signed) Object.assign(headers, signRequest({secret: this.options.secret, method, target, body: payload}))
    let response: Dispatcher.ResponseData
    try {
      response = await undiciRequest(`${this.origin}${target}`, {
        method,
        headers,
        body: payload,
        dispatcher: this.dispatcher,
        signal: options.signal,
        ...(options.bodyTimeout ? {bodyTimeout: options.bodyTimeout} : {}),
      })
    } catch (error) {
      throw transportError(error, method, target)
    }
    const status = response.statusCode
    if (status >= 200 && status < 300) return {response, method, target} as never
    const text = await response.body.text().catch(() => '')
    const {code, message} = errorBodyOf(text, status)
    if (options.absentOn && code === options.absentOn) return {response: null} as never
    throw httpError(status, code, `${method} ${target}: edge host answered ${status} ${code}${message ? `: ${message}` : ''}`)
  }
}

/** The request of a call: path parameters (when the path has any), query and body. */
type CallRequest<E extends Endpoint> = (keyof PathParams<E> extends never ? {params?: PathParams<E>} : {params: PathParams<E>}) & {
  query?: QueryParams<E>
  body?: RequestBody<E>
}

/** Every control mutation's endpoint takes a body and answers one. */
type ControlEndpoint = Endpoint & {request: z.ZodType; response: z.ZodType}

/** A 2xx answer whose body is still to be read. */
interface Opened {
  response: Dispatcher.ResponseData
  method: string
  target: string
}

interface Answer {
  method: string
  target: string
  status: number
  data: unknown
}

function checked<E extends Endpoint & {response: z.ZodType}>(endpoint: E, answer: Answer): ResponseBody<E> {
  const parsed = endpoint.response.safeParse(answer.data)
  if (!parsed.success)
    throw new ProviderError(
      'retryable',
      'edge_host_bad_response',
      `${answer.method} ${answer.target}: the edge host answered a body this kit does not understand`,
      answer.status,
    )
  return parsed.data as ResponseBody<E>
}

/** Where each control mutation goes and the body it carries (the mutation meta is added by the caller). */
function controlRequest(scriptName: string, mutation: ControlMutation): {endpoint: ControlEndpoint; params: Record<string, string>; body: object} {
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
