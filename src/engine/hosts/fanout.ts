// The provider of a kit with several edge hosts (docs/many-hosts.md): one EdgeProvider over the
// providers of the kit's hosts, so the deploy task, control mutations, retirements and fences reach
// every host without knowing how many there are.
// - A write goes to every host at once. A host that does not answer, and has not answered for at
//   least hosts.unreachable_grace_seconds (a draining host: at once), is skipped — marked behind, the
//   host reconcile lane catches it up — and the write succeeds on the others. Any other failure is
//   the write's failure (the caller retries; hosts take a repeated write idempotently).
// - Readiness is true only when every host counted serves the release; each that does is recorded.
// - A host the kit marked behind (it missed a write while down) that refuses a control mutation — a
//   revision it has not caught up to, a release it lacks — is skipped like a host that is down: the
//   host reconcile lane copies it the whole control state from a current host before it is ready. So
//   drift on one host never wedges a row.
// - A read of one host goes to the first that answers; control state is read from a current host first.
// - A Worker with an owner host (./placement.ts) runs there alone: its uploads reach every host, but
//   each other host is told first to hand it over (hold the release and take its control calls
//   without running it, so it never writes the data); its readiness and read-back are the owner's.
import type {HostMemberRow} from '../../store/index.js'
import {canonicalJson} from '../../canonical-json.js'
import type {TailLine} from '../../protocol/tail.js'
import {ProviderError, type EdgeProvider, type ScriptDetails} from '../../provider/types.js'
import {needsOwner} from './placement.js'

export interface FanoutMember {
  row: HostMemberRow
  provider: EdgeProvider
}

/** What the fan-out tells the store about the hosts as it meets them. */
export interface FanoutRecorder {
  unreachable(hostScope: string): Promise<void>
  reached(hostScope: string): Promise<void>
  behind(hostScope: string): Promise<void>
  ready(hostScope: string, scriptName: string, releaseGeneration: string): Promise<void>
}

/** The answers that mean the host is down (nothing reached it, or it died answering). */
const HOST_DOWN_CODES = new Set(['edge_host_unreachable', 'edge_host_no_answer'])

export function hostDown(error: unknown): boolean {
  return error instanceof ProviderError && HOST_DOWN_CODES.has(error.code)
}

const RECEIPT_NOT_FOUND = 'edge_host_receipt_not_found'

/** A refusal for good (not down, not fenced, not a transient 5xx): what a behind host answers a mutation it cannot apply yet. */
function refused(error: unknown): boolean {
  return error instanceof ProviderError && error.kind === 'terminal' && error.status !== undefined
}

/** 0: confirmed and took every write since; 1: not confirmed yet; 2: missed a write. Control state is read from the lowest first. */
export function currencyOf(member: FanoutMember): number {
  if (member.row.behind_since !== null) return 2
  return member.row.confirmed_at === null ? 1 : 0
}

type Answer<T> = {member: FanoutMember; value: T}

/** Where a stateful Worker runs: its owner, and during a move the host its data is being copied to. */
export interface Ownership {
  host: string
  movingTo: string | null
}

/** The store's owner rows, as the fan-out reads and claims them. */
export interface FanoutPlacement {
  ownerOf(scriptName: string): Promise<Ownership | null>
  /** The Worker's owner; `hostScope` when it has none yet. */
  claim(scriptName: string, hostScope: string): Promise<Ownership>
}

export class FanoutProvider implements EdgeProvider {
  constructor(
    readonly scope: string,
    private readonly members: readonly FanoutMember[],
    private readonly graceMs: number,
    private readonly now: () => number,
    private readonly record: FanoutRecorder,
    private readonly placement: FanoutPlacement,
  ) {}

  /** Runs `call` on every host; the answers of those that answered, in member order (see the header for skips). */
  private async each<T>(
    call: (provider: EdgeProvider, member: FanoutMember) => Promise<T>,
    options: {skipRefusalsOfBehind?: boolean} = {},
  ): Promise<Array<Answer<T>>> {
    const settled = await Promise.allSettled(this.members.map((member) => call(member.provider, member)))
    const answers: Array<Answer<T>> = []
    let failure: unknown = null
    for (const [index, outcome] of settled.entries()) {
      const member = this.members[index]!
      if (outcome.status === 'fulfilled') {
        await this.reached(member)
        answers.push({member, value: outcome.value})
        continue
      }
      if (hostDown(outcome.reason)) {
        const since = await this.unreachable(member)
        if (member.row.state === 'draining' || this.now() - since >= this.graceMs) {
          await this.behind(member)
          continue
        }
      }
      if (options.skipRefusalsOfBehind && member.row.behind_since !== null && refused(outcome.reason)) {
        await this.behind(member)
        continue
      }
      failure ??= outcome.reason
    }
    if (failure !== null) throw failure
    if (answers.length === 0) throw settled.map((outcome) => (outcome as PromiseRejectedResult).reason)[0]
    return answers
  }

  /** Writes whose every answer is alike: the first host's. */
  private async all<T>(call: (provider: EdgeProvider) => Promise<T>): Promise<T> {
    return (await this.each(call))[0]!.value
  }

  private async behind(member: FanoutMember): Promise<void> {
    member.row.behind_since ??= this.now()
    await this.record.behind(member.row.host_scope)
  }

  /** Asks the hosts in order (control reads: current hosts first) until one answers; a host that is down is passed over. */
  private async first<T>(call: (provider: EdgeProvider) => Promise<T>, order: 'members' | 'currency' = 'members'): Promise<T> {
    let failure: unknown = null
    const members = order === 'members' ? this.members : [...this.members].sort((a, b) => currencyOf(a) - currencyOf(b))
    for (const member of members) {
      try {
        const value = await call(member.provider)
        await this.reached(member)
        return value
      } catch (error) {
        if (!hostDown(error)) throw error
        await this.unreachable(member)
        failure ??= error
      }
    }
    throw failure
  }

  /**
   * Which of these hosts runs the owned Worker: its owner, else the host a move copies it to (the
   * move's own deploy; a deploy through the kit during a move waits for the switch). null
   * for a fan-out over hosts that only hold it (the host reconcile lane bringing a non-owner
   * current): there it is ready once stored, as it never runs there.
   */
  private runner(ownership: Ownership): string | null {
    for (const host of [ownership.host, ownership.movingTo]) if (host && this.members.some((member) => member.row.host_scope === host)) return host
    return null
  }

  /** Asks the one host `hostScope` (a Worker's owner). */
  private async on<T>(hostScope: string, call: (provider: EdgeProvider) => Promise<T>): Promise<Answer<T>> {
    const member = this.members.find((candidate) => candidate.row.host_scope === hostScope)
    if (!member) throw new ProviderError('retryable', 'edge_host_unreachable', `the owner host ${hostScope} of this Worker is not a host of the kit`)
    try {
      const value = await call(member.provider)
      await this.reached(member)
      return {member, value}
    } catch (error) {
      if (hostDown(error)) await this.unreachable(member)
      throw error
    }
  }

  private async reached(member: FanoutMember): Promise<void> {
    if (member.row.unreachable_since === null) return
    member.row.unreachable_since = null
    await this.record.reached(member.row.host_scope)
  }

  /** Since when the host has been down (now, the first time). */
  private async unreachable(member: FanoutMember): Promise<number> {
    if (member.row.unreachable_since === null) {
      member.row.unreachable_since = this.now()
      await this.record.unreachable(member.row.host_scope)
    }
    return member.row.unreachable_since
  }

  describeHost: EdgeProvider['describeHost'] = (signal) => this.first((p) => p.describeHost(signal))
  async uploadScript(...[input, signal]: Parameters<EdgeProvider['uploadScript']>): Promise<ScriptDetails> {
    const firstActive = this.members.find((member) => member.row.state === 'active') ?? this.members[0]!
    // Fixed at the first deploy (the first active host by pairing order), so it never changes as hosts come and go.
    const ownership = needsOwner(input)
      ? await this.placement.claim(input.scriptName, firstActive.row.host_scope)
      : await this.placement.ownerOf(input.scriptName)
    if (!ownership) return this.all((p) => p.uploadScript(input, signal))
    const runner = this.runner(ownership)
    const answers = await this.each(async (provider, member) => {
      if (member.row.host_scope === runner) return provider.uploadScript(input, signal)
      await provider.handOverScript(input.scriptName, signal)
      const details = await provider.uploadScript(input, signal)
      // Held is all a host that does not run the Worker should do: it is current with this release.
      await this.record.ready(member.row.host_scope, input.scriptName, input.releaseGeneration)
      return details
    })
    return (answers.find((answer) => answer.member.row.host_scope === ownership.host) ?? answers[0]!).value
  }

  putAssets: EdgeProvider['putAssets'] = (files, signal) => this.all((p) => p.putAssets(files, signal))
  lockdownScript: EdgeProvider['lockdownScript'] = (name, signal) => this.all((p) => p.lockdownScript(name, signal))
  controlMutation: EdgeProvider['controlMutation'] = async (name, mutation, meta, signal) =>
    (await this.each((p) => p.controlMutation(name, mutation, meta, signal), {skipRefusalsOfBehind: true}))[0]!.value
  writeControlCopy: EdgeProvider['writeControlCopy'] = async (name, copy, signal) =>
    (await this.each((p) => p.writeControlCopy(name, copy, signal))).some((answer) => answer.value)
  replaceAccessPolicy: EdgeProvider['replaceAccessPolicy'] = (name, policy, signal) => this.all((p) => p.replaceAccessPolicy(name, policy, signal))
  purgeSecrets: EdgeProvider['purgeSecrets'] = (name, signal) => this.all((p) => p.purgeSecrets(name, signal))
  purgeCredentials: EdgeProvider['purgeCredentials'] = (name, signal) => this.all((p) => p.purgeCredentials(name, signal))
  retireScript: EdgeProvider['retireScript'] = (name, signal) => this.all((p) => p.retireScript(name, signal))
  purgeScriptData: EdgeProvider['purgeScriptData'] = (name, signal) => this.all((p) => p.purgeScriptData(name, signal))
  beginFence: EdgeProvider['beginFence'] = (input, signal) => this.all((p) => p.beginFence(input, signal))
  endFence: EdgeProvider['endFence'] = (id, signal) => this.all((p) => p.endFence(id, signal))
  setKitReadiness: EdgeProvider['setKitReadiness'] = (serving, signal) => this.all((p) => p.setKitReadiness(serving, signal))
  // A move (./move.ts) talks to the two hosts themselves; through the kit these mean every host.
  handOverScript: EdgeProvider['handOverScript'] = (name, signal) => this.all((p) => p.handOverScript(name, signal))
  writeScriptData: EdgeProvider['writeScriptData'] = (name, data, signal) => this.all((p) => p.writeScriptData(name, data, signal))
  dropScriptData: EdgeProvider['dropScriptData'] = (name, signal) => this.all((p) => p.dropScriptData(name, signal))

  async missingAssets(hashes: string[], signal?: AbortSignal): Promise<string[]> {
    const answers = await this.each((p) => p.missingAssets(hashes, signal))
    return [...new Set(answers.flatMap((answer) => answer.value))]
  }

  /** The asset files any host stores that no release there names (sorted). */
  async unreferencedAssets(signal?: AbortSignal): Promise<string[]> {
    const answers = await this.each((p) => p.unreferencedAssets(signal))
    return [...new Set(answers.flatMap((answer) => answer.value))].sort()
  }

  /** The hosts' copy when they all hold the same; null when they differ (an upload then makes them alike). */
  async getScript(scriptName: string, signal?: AbortSignal): Promise<ScriptDetails | null> {
    const ownership = await this.placement.ownerOf(scriptName)
    const runner = ownership && this.runner(ownership)
    if (runner) return (await this.on(runner, (p) => p.getScript(scriptName, signal))).value
    const answers = await this.each((p) => p.getScript(scriptName, signal))
    const [head, ...rest] = answers.map((answer) => answer.value)
    return rest.every((details) => sameScript(head ?? null, details)) ? (head ?? null) : null
  }

  async probeReadiness(scriptName: string, releaseGeneration: string, options?: {waitMs?: number; signal?: AbortSignal}): Promise<boolean> {
    const ownership = await this.placement.ownerOf(scriptName)
    const runner = ownership && this.runner(ownership)
    if (ownership && !runner) {
      const held = await this.each((p) => p.getScript(scriptName, options?.signal))
      return held.every((answer) => answer.value?.releaseGeneration === releaseGeneration)
    }
    const answers = runner
      ? [await this.on(runner, (p) => p.probeReadiness(scriptName, releaseGeneration, options))]
      : await this.each((p) => p.probeReadiness(scriptName, releaseGeneration, options))
    for (const answer of answers) if (answer.value) await this.record.ready(answer.member.row.host_scope, scriptName, releaseGeneration)
    return answers.every((answer) => answer.value)
  }

  /** A receipt any host holds: the mutation was applied there (a host that was skipped catches up separately). */
  async getReceipt(...args: Parameters<EdgeProvider['getReceipt']>): Promise<unknown> {
    const answers = await this.each((p) => p.getReceipt(...args))
    return answers.find((answer) => answer.value !== null)?.value ?? null
  }

  /** Acknowledged on every host that holds the receipt: a host skipped by the mutation has none, and that is no failure. */
  async acknowledgeReceipt(mutationId: string, signal?: AbortSignal): Promise<unknown> {
    const missing = Symbol('no receipt')
    const answers = await this.each((p) =>
      p.acknowledgeReceipt(mutationId, signal).catch((error: unknown) => {
        if (error instanceof ProviderError && error.code === RECEIPT_NOT_FOUND) return missing
        throw error
      }),
    )
    const held = answers.find((answer) => answer.value !== missing)
    if (held) return held.value
    throw new ProviderError('terminal', RECEIPT_NOT_FOUND, `no host of the kit holds a receipt for mutation ${mutationId}`, 404)
  }

  async fenceStatus(signal?: AbortSignal): ReturnType<EdgeProvider['fenceStatus']> {
    const answers = await this.each((p) => p.fenceStatus(signal))
    return {active: answers.find((answer) => answer.value.active)?.value.active ?? null, recent: answers[0]!.value.recent}
  }

  getFence: EdgeProvider['getFence'] = (id, signal) => this.first((p) => p.getFence(id, signal))
  listScripts: EdgeProvider['listScripts'] = (cursor, signal) => this.first((p) => p.listScripts(cursor, signal))
  controlState: EdgeProvider['controlState'] = (name, signal) => this.first((p) => p.controlState(name, signal), 'currency')
  controlRevision: EdgeProvider['controlRevision'] = (name, part, signal) => this.first((p) => p.controlRevision(name, part, signal), 'currency')
  controlCopy: EdgeProvider['controlCopy'] = (name, signal) => this.first((p) => p.controlCopy(name, signal), 'currency')
  inventory: EdgeProvider['inventory'] = (signal) => this.first((p) => p.inventory(signal))
  readScriptData: EdgeProvider['readScriptData'] = (name, signal) => this.first((p) => p.readScriptData(name, signal))
  downloadSnapshot: EdgeProvider['downloadSnapshot'] = (id, file, signal) => this.first((p) => p.downloadSnapshot(id, file, signal))
  workerActivity: EdgeProvider['workerActivity'] = (signal) => this.first((p) => p.workerActivity(signal))
  d1Query: EdgeProvider['d1Query'] = (name, request, signal) => this.first((p) => p.d1Query(name, request, signal))
  queues: EdgeProvider['queues'] = (name, signal) => this.first((p) => p.queues(name, signal))
  cronTriggers: EdgeProvider['cronTriggers'] = (name, signal) => this.first((p) => p.cronTriggers(name, signal))

  /** The events of the first host only: one host's view of the Worker. */
  tail(scriptName: string, signal: AbortSignal): AsyncIterable<TailLine> {
    return this.members[0]!.provider.tail(scriptName, signal)
  }
}

function sameScript(a: ScriptDetails | null, b: ScriptDetails | null): boolean {
  if (a === null || b === null) return a === b
  return a.releaseGeneration === b.releaseGeneration && a.state === b.state && canonicalJson(a.moduleDigests) === canonicalJson(b.moduleDigests)
}
