// Backup fences and the data snapshots taken under them, host side: a fence stops every change of
// scripts and control state (the rule itself is ../state/fences.ts), and a snapshot is staged only
// under the active fence, which must still hold once the copy is made. Answers are the protocol's
// wire shapes.
import type {Logger} from 'pino'
import type {Fence, FenceStatus, ValidBeginFence} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
import type {HostIdentity} from '../identity.js'
import type {HostFence, HostState} from '../state/host-state.js'
import {iso, isoOrNull} from './common.js'
import {stageSnapshot, type StagedSnapshot} from './snapshot.js'

export interface FenceServiceOptions {
  dataDir: string
  state: HostState
  identity: HostIdentity
  maxFenceTtlSeconds: number
  log: Logger
}

export class FenceService {
  constructor(private readonly options: FenceServiceOptions) {}

  status(): FenceStatus {
    const {fences} = this.options.state
    const active = fences.active()
    return {active: active ? fenceView(active) : null, recent: fences.recent().map(fenceView)}
  }

  begin(body: ValidBeginFence): {fence: Fence; created: boolean} {
    if (body.ttlSeconds > this.options.maxFenceTtlSeconds) {
      throw new HostError('invalid_request', `ttlSeconds: at most ${this.options.maxFenceTtlSeconds} (fence.max_ttl_seconds)`)
    }
    const {fence, created} = this.options.state.fences.begin(body.fenceId, body.ttlSeconds, body.reason)
    if (created) this.options.log.info({fenceId: fence.fenceId, expiresAt: iso(fence.expiresAt)}, 'fence begun')
    return {fence: fenceView(fence), created}
  }

  get(fenceId: string): Fence {
    const fence = this.options.state.fences.get(fenceId)
    if (!fence) throw new HostError('fence_not_found', `the host has no fence ${fenceId}`)
    return fenceView(fence)
  }

  end(fenceId: string): Fence {
    const fence = this.options.state.fences.end(fenceId)
    this.options.log.info({fenceId, liftReason: fence.liftReason}, 'fence lifted')
    return fenceView(fence)
  }

  /** Stages a snapshot of the data dir; only under the active fence `fenceId`, which must still hold once it is staged. */
  async snapshot(fenceId: string): Promise<StagedSnapshot> {
    const fence = this.requireActive(fenceId)
    const {dataDir, state, identity} = this.options
    const staged = await stageSnapshot({dataDir, state, identity, fence})
    try {
      // Lifted (or expired) meanwhile: scripts may have changed under the copy.
      this.requireActive(fenceId)
    } catch (error) {
      await staged.dispose()
      throw error
    }
    this.options.log.info({fenceId}, 'data snapshot staged')
    return staged
  }

  private requireActive(fenceId: string): HostFence {
    const active = this.options.state.fences.active()
    if (active?.fenceId !== fenceId) {
      throw new HostError(
        'fence_required',
        active ? `the active fence is ${active.fenceId}, not ${fenceId}` : `fence ${fenceId} is not active; a data snapshot needs it`,
      )
    }
    return active
  }
}

export function fenceView(fence: HostFence): Fence {
  return {
    fenceId: fence.fenceId,
    reason: fence.reason,
    state: fence.liftedAt === null ? 'active' : 'lifted',
    startedAt: iso(fence.startedAt),
    expiresAt: iso(fence.expiresAt),
    liftedAt: isoOrNull(fence.liftedAt),
    liftReason: fence.liftReason,
  }
}
