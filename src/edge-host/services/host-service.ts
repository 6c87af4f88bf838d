// What the management API does, independent of HTTP: every operation validates its input, asks the
// host state to change (one transaction, fence-checked), and tells the runtime which shard must pick
// the change up. Answers are the protocol's wire shapes.
import type {Logger} from 'pino'
import type {Settings} from '../../config/schema.js'
import {
  MAX_LISTING_PAGE_SIZE,
  SCRIPT_NAME_PATTERN,
  type AccessPolicy,
  type ControlMeta,
  type ControlResult,
  type CronTriggerList,
  type DataPurge,
  type Identity,
  type Inventory,
  type Lockdown,
  type PairResponse,
  type Receipt,
  type ReleaseSplit,
  type ScriptDetails,
  type ScriptList,
  type ScriptState,
  type ValidUploadScript,
} from '../../protocol/management-api.js'
import {pairingProofMessage} from '../../protocol/signing.js'
import {ControlService} from './control-service.js'
import {HostError} from '../errors.js'
import type {HostIdentity} from '../identity.js'
import type {WorkerdRuntime} from '../runtime/runtime.js'
import {D1Service} from './d1-service.js'
import {QueueService} from './queue-service.js'
import {refusalMessage} from '../../workerd/refusal.js'
import {type AssetCollector, assertAssetsHeld} from '../assets/management.js'
import type {AssetFiles} from '../assets/files.js'
import {assertScriptName, iso, isoOrNull, policyView, requireScript} from './common.js'
import {FenceService, fenceView} from './fence-service.js'
import {HandoverService} from './handover-service.js'
import {validationCandidate} from '../../workerd/script.js'
import {scriptStateOf, type HostState, type ScriptRecord, type ScriptUpload} from '../state/host-state.js'

export type HostSettings = Settings['host']

export interface ServiceOptions {
  dataDir: string
  state: HostState
  assets: AssetFiles
  /** Removes asset files no served release names; run after an upload and a retirement. */
  assetCollector: AssetCollector
  runtime: WorkerdRuntime
  identity: HostIdentity
  settings: HostSettings
  maxFenceTtlSeconds: number
  /** The data plane's advertised URL. */
  publicUrl: () => string
  /** The clock cron triggers follow (ms since the epoch). */
  cronClock: () => number
  /** A script was just retired (its per-Worker metrics and activity go). */
  onRetired?(name: string): void
  log: Logger
}

export class HostService {
  private readonly state: HostState
  private readonly runtime: WorkerdRuntime
  /** Access policy writes, runtime config, operation settings, secrets and service accounts. */
  readonly control: ControlService
  /** Backup fences and the data snapshots taken under them. */
  readonly fences: FenceService
  /** Moves of stateful Workers to another host of the kit. */
  readonly handovers: HandoverService
  /** SQL on scripts' D1 databases. */
  readonly d1: D1Service
  /** Scripts' queues and their counts. */
  readonly queues: QueueService

  constructor(private readonly options: ServiceOptions) {
    this.state = options.state
    this.runtime = options.runtime
    this.control = new ControlService(options.state, (name) => this.restartScriptShard(name))
    this.fences = new FenceService(options)
    this.handovers = new HandoverService(options)
    this.d1 = new D1Service(options.state, options.runtime, options.settings.request_hold_timeout_ms)
    this.queues = new QueueService(options.state, options.runtime, options.settings.request_hold_timeout_ms)
  }

  // ── Identity and pairing ────────────────────────────────────────────────────────────────────

  identity(): Identity {
    const {identity, settings} = this.options
    return {
      apiVersion: 'v1',
      hostPublicKey: identity.publicKey,
      fingerprint: identity.fingerprint,
      scope: identity.scope,
      paired: this.state.pairing.isPaired(),
      publicUrl: this.options.publicUrl(),
      baseDomain: settings.base_domain,
      experimental: settings.experimental,
    }
  }

  pair(code: string): PairResponse {
    const pairing = this.state.pairing.complete(code)
    if (!pairing) throw new HostError('pairing_code_invalid', 'the pairing code is not valid (used, rotated or mistyped)')
    const {identity} = this.options
    this.options.log.info({fingerprint: identity.fingerprint, scope: identity.scope}, 'host paired')
    return {
      secret: pairing.secret,
      hostPublicKey: identity.publicKey,
      fingerprint: identity.fingerprint,
      scope: identity.scope,
      proof: identity.sign(pairingProofMessage(code, pairing.secret)),
      pairedAt: iso(pairing.pairedAt),
    }
  }

  // ── Scripts ─────────────────────────────────────────────────────────────────────────────────

  async upload(name: string, body: ValidUploadScript): Promise<ScriptDetails> {
    assertScriptName(name)
    const upload = this.decodeUpload(body)
    // Cheap refusals first: validation runs a workerd.
    this.state.fences.assertNotFenced()
    this.state.scripts.assertNotRetired(name)
    if (upload.assets) await assertAssetsHeld(this.options.assets, upload.assets)
    if (!this.state.scripts.holdsUpload(name, upload)) {
      const existing = this.state.scripts.get(name)
      // Validate with the secrets and credentials the script would run with.
      const current = existing?.releaseGeneration ? this.state.scripts.runnable(existing) : null
      const candidate = validationCandidate({name, ...upload}, current)
      const verdict = await this.runtime.validate(candidate.script, candidate.modules)
      if (!verdict.ok) throw new HostError('script_invalid', `workerd refused the script: ${refusalMessage(verdict.error, name)}`)
      const shard = this.state.saveUpload(name, upload, {count: this.options.settings.shards, maxScriptsPerShard: this.options.settings.max_scripts_per_shard})
      if (shard !== null) {
        this.options.log.info({script: name, releaseGeneration: upload.releaseGeneration, shard}, 'script uploaded')
        void this.restartInBackground(shard)
        // A new release leaves the shard of its own it was moved to (Scripts.save): that one drops it.
        if (existing?.shard != null && existing.shard !== shard) void this.restartInBackground(existing.shard)
        if (existing?.releaseGeneration) void this.options.assetCollector.collect()
      }
    }
    return this.details(name)
  }

  /** The script's cron triggers with their last finished run and next run. */
  cronTriggers(name: string): CronTriggerList {
    assertScriptName(name)
    requireScript(this.state, name)
    return {triggers: this.state.cronRuns.status(name, this.options.cronClock())}
  }

  details(name: string): ScriptDetails {
    assertScriptName(name)
    const script = requireScript(this.state, name)
    return {
      name,
      state: scriptStateOf(script),
      releaseGeneration: script.releaseGeneration,
      liveReleaseGeneration: this.liveGeneration(script),
      mainModule: script.mainModule,
      compatibilityDate: script.compatibilityDate,
      compatibilityFlags: script.compatibilityFlags,
      builderPolicy: script.builderPolicy,
      tags: script.tags,
      modules: this.state.scripts.modulesOf(name),
      bindings: script.bindings.map((binding) =>
        binding.type === 'durable_object_namespace'
          ? {type: binding.type, name: binding.name, className: binding.className}
          : binding.type === 'service' && 'script' in binding
            ? {type: binding.type, name: binding.name, script: binding.script}
            : {type: binding.type, name: binding.name},
      ),
      shard: script.shard,
      createdAt: iso(script.createdAt),
      updatedAt: iso(script.updatedAt),
      lockedDownAt: isoOrNull(script.lockedDownAt),
      versionIds: script.versionIds,
      split: splitOf(this.state.scripts.splits.get(name)),
      retiredAt: isoOrNull(script.retiredAt),
    }
  }

  list(limitText: string | null, cursor: string | null): ScriptList {
    const limit = limitText === null ? this.options.settings.script_listing_page_size : Number(limitText)
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LISTING_PAGE_SIZE) {
      throw new HostError('invalid_request', `limit must be an integer from 1 to ${MAX_LISTING_PAGE_SIZE}`)
    }
    const after = cursor === null ? null : decodeCursor(cursor)
    // One extra row tells whether another page follows.
    const rows = this.state.scripts.page(after, limit + 1)
    const page = rows.slice(0, limit)
    return {
      scripts: page.map((script) => ({
        name: script.name,
        state: scriptStateOf(script),
        releaseGeneration: script.releaseGeneration,
        tags: script.tags,
        updatedAt: iso(script.updatedAt),
        handedOver: this.state.handovers.isHandedOver(script.name),
      })),
      nextCursor: rows.length > limit ? encodeCursor(page.at(-1)!.name) : null,
    }
  }

  retire(name: string): ScriptDetails {
    assertScriptName(name)
    const before = this.state.scripts.get(name)
    this.state.retire(name)
    if (before && before.retiredAt === null) {
      this.options.log.info({script: name}, 'script retired')
      this.options.onRetired?.(name)
      // The data plane answers 404 from now on; the restart just unloads the code.
      if (before.shard !== null) void this.restartInBackground(before.shard)
      void this.options.assetCollector.collect()
    }
    return this.details(name)
  }

  lockdown(name: string, meta: ControlMeta): ControlResult<Lockdown> {
    assertScriptName(name)
    return this.state.control(name, 'retirement.lockdown', meta, (tx) => {
      const lockedDownAt = this.state.scripts.lockDown(tx, name)
      this.options.log.info({script: name}, 'script locked down')
      return {conflict: false as const, current: {name, state: 'locked_down' as ScriptState, lockedDownAt: iso(lockedDownAt)}}
    })
  }

  /** With a release generation: the deploy readiness probe. */
  accessPolicy(name: string, releaseGeneration: string | null): AccessPolicy {
    assertScriptName(name)
    const script = requireScript(this.state, name)
    if (releaseGeneration !== null) {
      if (script.retiredAt !== null) throw new HostError('edge_host_script_retired', `script ${name} is retired`)
      const live = this.liveGeneration(script)
      if (live !== releaseGeneration) {
        throw new HostError(
          'script_not_ready',
          `release generation ${releaseGeneration} of ${name} is not live (stored ${script.releaseGeneration ?? 'none'}, live ${live ?? 'none'})`,
        )
      }
    }
    return policyView(script.policy)
  }

  /**
   * The readiness probe, waiting up to `waitMs` for the release generation to go live: it answers as
   * soon as a swap makes it live, or once the script holds another release (a newer upload replaced
   * it; it will never go live), or when the wait is over.
   */
  async awaitLive(name: string, releaseGeneration: string, waitMs: number): Promise<AccessPolicy> {
    const deadline = Date.now() + waitMs
    for (;;) {
      try {
        return this.accessPolicy(name, releaseGeneration)
      } catch (error) {
        const remaining = deadline - Date.now()
        const pending = error instanceof HostError && error.code === 'script_not_ready' && this.state.scripts.get(name)?.releaseGeneration === releaseGeneration
        if (!pending || remaining <= 0) throw error
        // Registered in the same turn as the check above, so no swap can slip between them.
        if (!(await this.runtime.nextSwap(remaining))) throw error
      }
    }
  }

  // ── Receipts ────────────────────────────────────────────────────────────────────────────────

  receipt(mutationId: string, commandDigest: string | null): Receipt {
    const receipt = this.state.receipts.get(mutationId)
    if (!receipt) throw new HostError('receipt_not_found', `the host has no receipt for mutation ${mutationId}`)
    if (commandDigest !== null && receipt.commandDigest !== commandDigest) {
      throw new HostError('mutation_conflict', `mutation ${mutationId} was applied with a different command digest`)
    }
    return {
      mutationId: receipt.mutationId,
      commandDigest: receipt.commandDigest,
      operation: receipt.operation,
      scriptName: receipt.scriptName,
      result: receipt.result,
      createdAt: iso(receipt.createdAt),
      acknowledgedAt: isoOrNull(receipt.acknowledgedAt),
    }
  }

  acknowledgeReceipt(mutationId: string): {acknowledged: true} {
    if (!this.state.acknowledgeReceipt(mutationId)) throw new HostError('receipt_not_found', `the host has no receipt for mutation ${mutationId}`)
    return {acknowledged: true}
  }

  // ── Inventory ───────────────────────────────────────────────────────────────────────────────

  inventory(): Inventory {
    const scripts = this.state.scripts.all()
    const fence = this.state.fences.active()
    return {
      generatedAt: iso(Date.now()),
      scope: this.options.identity.scope,
      fence: fence ? fenceView(fence) : null,
      counts: countByState(scripts),
      shards: this.runtime.shards.map((shard) => ({index: shard.index, state: shard.state, scripts: shard.scriptCount, restarts: shard.restarts})),
      scripts: scripts.map((script) => ({
        name: script.name,
        state: scriptStateOf(script),
        releaseGeneration: script.releaseGeneration,
        liveReleaseGeneration: this.liveGeneration(script),
        shard: script.shard,
        policyRevision: script.policy.revision,
        handedOver: this.state.handovers.isHandedOver(script.name),
      })),
      quarantined: this.state.quarantine.scripts().map((entry) => ({...entry, quarantinedAt: iso(entry.quarantinedAt)})),
    }
  }

  scriptCounts(): Record<ScriptState, number> {
    return countByState(this.state.scripts.all())
  }

  // ── Helpers ─────────────────────────────────────────────────────────────────────────────────

  private liveGeneration(script: ScriptRecord): string | null {
    return script.retiredAt === null ? (this.runtime.liveGeneration(script.name, script.shard) ?? null) : null
  }

  private decodeUpload(body: ValidUploadScript): ScriptUpload {
    const modules = body.modules.map((module) => ({name: module.name, type: module.type, content: Buffer.from(module.contentBase64, 'base64')}))
    const total = modules.reduce((sum, module) => sum + module.content.length, 0)
    const limit = this.options.settings.max_script_bytes
    if (total > limit) throw new HostError('script_too_large', `the modules total ${total} bytes; the limit is ${limit} bytes`)
    return {...body, modules}
  }

  /**
   * Deletes a retired script's Durable Object data, its KV, D1, R2 and queue data with it: what
   * `company purge` reaches on the host (the host reconcile lane asks it for the purged company's
   * scripts). Never for a script that runs, nor under a fence (a backup copies those files).
   */
  async purgeData(name: string): Promise<DataPurge> {
    assertScriptName(name)
    this.state.fences.assertNotFenced()
    const script = this.state.scripts.get(name)
    if (script && script.retiredAt === null) throw new HostError('script_not_retired', `script ${name} is not retired: only a retired script's data is purged`)
    const purged = await this.runtime.removeDurableObjectData(name)
    if (purged) this.options.log.info({script: name}, 'script data purged')
    return {purged}
  }

  /** Resolves once the swap is done (or failed: logged, and retried by the shard); most callers do not wait. */
  private restartScriptShard(name: string): Promise<void> {
    const shard = this.state.scripts.get(name)?.shard
    return shard !== null && shard !== undefined ? this.restartInBackground(shard) : Promise.resolve()
  }

  /** Callers of a release wait on the readiness probe instead; a control copy waits for the swap itself. Failures are retried by the shard. */
  private restartInBackground(shard: number): Promise<void> {
    return this.runtime.refreshShard(shard).catch((error: unknown) => this.options.log.error({shard, err: error}, 'shard restart failed'))
  }
}

function splitOf(split: ReleaseSplit | null): ReleaseSplit | null {
  return split && {releaseGeneration: split.releaseGeneration, versionIds: split.versionIds, percentage: split.percentage}
}

function countByState(scripts: ScriptRecord[]): Record<ScriptState, number> {
  const counts: Record<ScriptState, number> = {active: 0, locked_down: 0, retired: 0}
  for (const script of scripts) counts[scriptStateOf(script)]++
  return counts
}

/** Cursors are opaque to callers: base64url of the last name returned. */
function encodeCursor(name: string): string {
  return Buffer.from(name).toString('base64url')
}

function decodeCursor(cursor: string): string {
  const name = Buffer.from(cursor, 'base64url').toString()
  if (!SCRIPT_NAME_PATTERN.test(name)) throw new HostError('invalid_request', 'cursor is not one this host issued')
  return name
}
