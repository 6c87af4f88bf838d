// The on-prem provider: the engine's EdgeProvider over the edge host's management API. Each
// operation is a call of the endpoint table (src/protocol/endpoints.ts) through ./transport.ts,
// which signs, times out and checks answers; ./wire.ts translates to and from the wire shapes.
import {createHash} from 'node:crypto'
import {open, rm} from 'node:fs/promises'
import {pipeline} from 'node:stream/promises'
import {endpoints} from '../../protocol/endpoints.js'
import {READINESS_WAIT_MAX_MS, type ScriptData, type UploadScript} from '../../protocol/management-api.js'
import {wireBindingOf} from '../../protocol/worker-bindings.js'
import type {TailLine, WorkerActivity} from '../../protocol/tail.js'
import type {D1QueryRequest, D1QueryResult} from '../../protocol/api/d1.js'
import type {CronTriggerList} from '../../protocol/api/crons.js'
import type {QueueList} from '../../protocol/api/queues.js'
import {
  ProviderError,
  type AccessPolicy,
  type ControlCopy,
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
import {parseJson, transportError} from './failures.js'
import {ManagementTransport, type Opened} from './transport.js'
import {controlRequest, detailsOf, fenceOf} from './wire.js'

/** A tail stream silent for this long (heartbeats are every 5 s) is taken for dead. */
const TAIL_SILENCE_LIMIT_MS = 20_000

export class OnPremProvider implements EdgeProvider {
  readonly scope: string
  private readonly host: ManagementTransport

  constructor(private readonly options: HostTarget) {
    this.scope = options.scope
    this.host = new ManagementTransport(options)
  }

  async describeHost(signal?: AbortSignal): Promise<HostDescription> {
    const identity = await this.host.call(endpoints.identity, {}, signal)
    return {publicUrl: identity.publicUrl, baseDomain: identity.baseDomain, experimental: identity.experimental}
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
      crons: input.crons,
      queueConsumers: input.queueConsumers,
      versionIds: input.versionIds,
      split: input.split,
    }
    return detailsOf(await this.host.call(endpoints.uploadScript, {params: {name: input.scriptName}, body}, signal))
  }

  async missingAssets(hashes: string[], signal?: AbortSignal): Promise<string[]> {
    return (await this.host.call(endpoints.missingAssets, {body: {hashes}}, signal)).missing
  }

  async putAssets(files: Array<{sha256: string; content: Uint8Array}>, signal?: AbortSignal): Promise<void> {
    const body = {files: files.map((file) => ({sha256: file.sha256, contentBase64: Buffer.from(file.content).toString('base64')}))}
    await this.host.call(endpoints.putAssets, {body}, signal)
  }

  async unreferencedAssets(signal?: AbortSignal): Promise<string[]> {
    return (await this.host.call(endpoints.unreferencedAssets, {}, signal)).unreferenced
  }

  async getScript(scriptName: string, signal?: AbortSignal): Promise<ScriptDetails | null> {
    const details = await this.host.find(endpoints.script, {params: {name: scriptName}}, 'script_not_found', signal)
    return details && detailsOf(details)
  }

  async probeReadiness(scriptName: string, releaseGeneration: string, {waitMs = 0, signal}: {waitMs?: number; signal?: AbortSignal} = {}): Promise<boolean> {
    // The host's answer must come well within the read timeout, which also bounds a waiting probe.
    const wait = Math.floor(Math.min(waitMs, READINESS_WAIT_MAX_MS, this.options.readTimeoutMs / 2))
    const query = {releaseGeneration, waitMs: wait > 0 ? wait : null}
    return (await this.host.find(endpoints.accessPolicy, {params: {name: scriptName}, query}, 'script_not_ready', signal)) !== null
  }

  async listScripts(cursor: string | null, signal?: AbortSignal): Promise<ScriptListPage> {
    const page = await this.host.call(endpoints.listScripts, {query: {cursor}}, signal)
    return {
      scripts: page.scripts.map((script) => ({
        scriptName: script.name,
        state: script.state,
        tags: script.tags,
        releaseGeneration: script.releaseGeneration,
        handedOver: script.handedOver,
      })),
      nextCursor: page.nextCursor,
    }
  }

  async lockdownScript(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.lockdown, {params: {name: scriptName}}, signal)
  }

  async replaceAccessPolicy(scriptName: string, policy: AccessPolicy, signal?: AbortSignal): Promise<void> {
    const body = {
      mode: policy.mode,
      ...(policy.mode === 'api_key' ? {apiKeySha256: policy.apiKeySha256 ?? undefined} : {}),
      ...(policy.mode === 'teamsync_internal' ? {ipAllowlist: policy.ipAllowlist} : {}),
    }
    await this.host.call(endpoints.replaceAccessPolicy, {params: {name: scriptName}, body}, signal)
  }

  async controlMutation(scriptName: string, mutation: ControlMutation, meta: MutationMeta, signal?: AbortSignal): Promise<unknown> {
    const {endpoint, params, body} = controlRequest(scriptName, mutation)
    return this.host.call(endpoint, {params, body: {...body, ...meta}}, signal)
  }

  // Receipts and their acknowledgement are checked by the engine itself (engine/control/receipts.ts),
  // which files a malformed one under its own codes: they are handed over as the host sent them.
  async getReceipt(meta: MutationMeta, signal?: AbortSignal): Promise<unknown> {
    const request = {params: {mutationId: meta.mutationId}, query: {commandDigest: meta.commandDigest}}
    return (await this.host.send(endpoints.receipt, request, {signal, absentOn: 'receipt_not_found'}))?.data ?? null
  }

  async acknowledgeReceipt(mutationId: string, signal?: AbortSignal): Promise<unknown> {
    return (await this.host.send(endpoints.receiptAck, {params: {mutationId}}, {signal}))?.data ?? null
  }

  async controlState(scriptName: string, signal?: AbortSignal): Promise<ControlState> {
    const params = {name: scriptName}
    const [accessPolicy, secrets, serviceAccounts, runtimeConfig, operationSettings] = await Promise.all([
      this.host.call(endpoints.accessPolicy, {params}, signal),
      this.host.call(endpoints.secrets, {params}, signal),
      this.host.call(endpoints.serviceAccounts, {params}, signal),
      this.host.call(endpoints.runtimeConfig, {params}, signal),
      this.host.call(endpoints.operationSettings, {params}, signal),
    ])
    return {accessPolicy, secrets: secrets.secrets, serviceAccounts: serviceAccounts.serviceAccounts, runtimeConfig, operationSettings}
  }

  async controlCopy(scriptName: string, signal?: AbortSignal): Promise<ControlCopy> {
    return this.host.call(endpoints.controlCopy, {params: {name: scriptName}}, signal)
  }

  async writeControlCopy(scriptName: string, copy: ControlCopy, signal?: AbortSignal): Promise<boolean> {
    return (await this.host.call(endpoints.putControlCopy, {params: {name: scriptName}, body: copy}, signal)).changed
  }

  async controlRevision(scriptName: string, part: RevisionedControl, signal?: AbortSignal): Promise<number> {
    const params = {name: scriptName}
    switch (part) {
      case 'access_policy':
        return (await this.host.call(endpoints.accessPolicy, {params}, signal)).revision
      case 'runtime_config':
        return (await this.host.call(endpoints.runtimeConfig, {params}, signal)).revision
      case 'operation_settings':
        return (await this.host.call(endpoints.operationSettings, {params}, signal)).revision
    }
  }

  async purgeSecrets(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.purgeSecrets, {params: {name: scriptName}}, signal)
  }

  async purgeCredentials(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.purgeServiceAccounts, {params: {name: scriptName}}, signal)
  }

  async retireScript(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.retire, {params: {name: scriptName}}, signal)
  }

  async purgeScriptData(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.purgeScriptData, {params: {name: scriptName}}, signal)
  }

  async beginFence(input: {fenceId: string; ttlSeconds: number; reason: string}, signal?: AbortSignal): Promise<HostFence> {
    return fenceOf(await this.host.call(endpoints.beginFence, {body: input}, signal))
  }

  async endFence(fenceId: string, signal?: AbortSignal): Promise<HostFence> {
    return fenceOf(await this.host.call(endpoints.fenceEnd, {params: {fenceId}}, signal))
  }

  async getFence(fenceId: string, signal?: AbortSignal): Promise<HostFence | null> {
    const fence = await this.host.find(endpoints.fenceById, {params: {fenceId}}, 'fence_not_found', signal)
    return fence && fenceOf(fence)
  }

  async fenceStatus(signal?: AbortSignal): Promise<{active: HostFence | null; recent: HostFence[]}> {
    const status = await this.host.call(endpoints.fence, {}, signal)
    return {active: status.active && fenceOf(status.active), recent: status.recent.map(fenceOf)}
  }

  async setKitReadiness(serving: boolean, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.kitReadiness, {body: {serving}}, signal)
  }

  async handOverScript(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.handOver, {params: {name: scriptName}}, signal)
  }

  async readScriptData(scriptName: string, signal?: AbortSignal): Promise<ScriptData> {
    return this.host.call(endpoints.scriptData, {params: {name: scriptName}}, signal)
  }

  async writeScriptData(scriptName: string, data: ScriptData, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.importScriptData, {params: {name: scriptName}, body: data}, signal)
  }

  async dropScriptData(scriptName: string, signal?: AbortSignal): Promise<void> {
    await this.host.call(endpoints.dropScriptData, {params: {name: scriptName}}, signal)
  }

  async inventory(signal?: AbortSignal): Promise<HostInventory> {
    const inventory = await this.host.call(endpoints.inventory, {}, signal)
    return {
      scripts: inventory.scripts.map((script) => ({
        scriptName: script.name,
        state: script.state,
        tags: [],
        releaseGeneration: script.releaseGeneration,
        handedOver: script.handedOver,
      })),
      activeFence: inventory.fence && fenceOf(inventory.fence),
      shards: inventory.shards,
      quarantined: inventory.quarantined,
    }
  }

  async downloadSnapshot(fenceId: string, file: string, signal?: AbortSignal): Promise<{size: number; sha256: string}> {
    const {response, method, target} = await this.host.open(endpoints.snapshot, {query: {fenceId}}, {signal})
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
      opened = await this.host.open(endpoints.tail, {params: {name: scriptName}}, {signal, bodyTimeout: TAIL_SILENCE_LIMIT_MS})
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
    return this.host.call(endpoints.workerActivity, {}, signal)
  }

  d1Query(scriptName: string, request: D1QueryRequest, signal?: AbortSignal): Promise<D1QueryResult> {
    return this.host.call(endpoints.d1Query, {params: {name: scriptName}, body: request}, signal)
  }

  queues(scriptName: string, signal?: AbortSignal): Promise<QueueList> {
    return this.host.call(endpoints.queues, {params: {name: scriptName}}, signal)
  }

  cronTriggers(scriptName: string, signal?: AbortSignal): Promise<CronTriggerList> {
    return this.host.call(endpoints.cronTriggers, {params: {name: scriptName}}, signal)
  }
}
