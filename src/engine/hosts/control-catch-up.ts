// Control state and fences for a host that missed them (docs/many-hosts.md). The store keeps no
// secret value, so what a host missed while down cannot be replayed from the outbox: the host
// reconcile lane copies each Worker's whole control state (policy, API key digest, runtime config,
// operation settings, secrets, service accounts — revisions included) from a host that took every
// control write, and checks both hosts hold the same before the host is confirmed ready. The copy
// lives in this process's memory for the length of one call; it is never logged, stored or part of
// an error. A host's fence is brought to the kit's: begun when the kit is inside one, ended when the
// host still holds one the kit has lifted (it would refuse every write until its TTL).
import {canonicalJson} from '../../canonical-json.js'
import {KitError} from '../../errors.js'
import type {EdgeProvider} from '../../provider/types.js'
import type {CurrentRelease, Store} from '../../store/index.js'
import {currencyOf as currency, type FanoutMember} from './fanout.js'

/** The hosts to copy `member`'s control state from, best first: those more current than it is. */
export function copySources(members: readonly FanoutMember[], member: FanoutMember): FanoutMember[] {
  return members
    .filter((other) => other !== member && other.row.state === 'active' && currency(other) < currency(member))
    .sort((a, b) => currency(a) - currency(b))
}

export interface ControlCatchUp {
  /** Scripts whose control state was written to the host this pass. */
  copied: string[]
  /** Scripts whose control state still differs from the source's after the copy (a write raced it). */
  differing: string[]
}

/**
 * Makes the host's control state of every current release the source's. Calls that fail throw (the
 * caller files the host as not current); a source that does not answer is passed over for the next.
 */
export async function copyControlState(member: FanoutMember, sources: FanoutMember[], releases: CurrentRelease[]): Promise<ControlCatchUp> {
  const result: ControlCatchUp = {copied: [], differing: []}
  if (sources.length === 0 || releases.length === 0) return result
  const source = await firstAnswering(sources)
  if (!source) throw new KitError('host_unreachable', 'no current host of the kit answers to copy control state from')
  for (const {script_name: script} of releases) {
    const wanted = await source.controlCopy(script)
    if (same(wanted, await member.provider.controlCopy(script))) continue
    await member.provider.writeControlCopy(script, wanted)
    result.copied.push(script)
    // A control write may have reached the source between the read and the copy: read both again.
    const [after, held] = await Promise.all([source.controlCopy(script), member.provider.controlCopy(script)])
    if (!same(after, held)) result.differing.push(script)
  }
  return result
}

async function firstAnswering(sources: FanoutMember[]): Promise<EdgeProvider | null> {
  for (const source of sources) {
    try {
      await source.provider.describeHost()
      return source.provider
    } catch {
      // Down or refusing: the next current host will do.
    }
  }
  return null
}

function same(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b)
}

/**
 * Brings the host's fence to the kit's: the kit's open fence begun on it (with what is left of its
 * TTL), a fence the kit no longer holds ended. Returns the kit's open fence id, if any: while it
 * holds, nothing can be copied to the host and it is not confirmed.
 */
export async function alignFence(store: Store, scope: string, provider: EdgeProvider): Promise<string | null> {
  const [open, held] = await Promise.all([store.kit.openFence(scope), provider.fenceStatus()])
  if (held.active && held.active.fenceId !== open?.id) await provider.endFence(held.active.fenceId)
  if (!open) return null
  if (held.active?.fenceId !== open.id) {
    const ttlSeconds = Math.max(1, Math.ceil((Number(open.expires_at) - store.clock.now()) / 1000))
    await provider.beginFence({fenceId: open.id, ttlSeconds, reason: open.reason})
  }
  return open.id
}
