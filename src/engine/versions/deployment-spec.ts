// What `versions deploy <worker> A@90 B@10` asks for: a deployment of at
// most two versions whose percentages add up to 100, as wrangler's `versions deploy` takes it
// (`<version>@<percentage>`, the `%` optional). One rule, here, for every way of asking.
import {KitError} from '../../errors.js'
import type {VersionRow} from '../../store/index.js'
import {namedVersion} from './names.js'

export interface DeploymentShare {
  version: VersionRow
  percentage: number
}

/** The versions named by `<version>@<percentage>` arguments, newest first; refused with one line. */
export function parseDeploymentSpec(versions: VersionRow[], specs: readonly string[]): DeploymentShare[] {
  if (specs.length === 0 || specs.length > 2) throw new KitError('usage', `a deployment holds one or two versions; ${specs.length} given`)
  const shares = specs.map((spec): DeploymentShare => {
    const match = /^(.+)@(\d{1,3})%?$/.exec(spec)
    if (!match) throw new KitError('usage', `${JSON.stringify(spec)} is not <version>@<percentage> (e.g. v1.2@10)`)
    return {version: namedVersion(versions, match[1]!), percentage: Number(match[2])}
  })
  return checkedDeployment(shares)
}

function checkedDeployment(shares: DeploymentShare[]): DeploymentShare[] {
  const total = shares.reduce((sum, share) => sum + share.percentage, 0)
  if (total !== 100) throw new KitError('usage', `the percentages add up to ${total}; they must add up to 100`)
  if (shares.some((share) => share.percentage > 100)) throw new KitError('usage', 'a percentage is at most 100')
  const [first, second] = shares
  if (second && first!.version.release_generation === second.version.release_generation) {
    throw new KitError('usage', `${first!.version.id} and ${second.version.id} are the same release; name two different versions`)
  }
  const stateful = second ? shares.map((share) => statefulBindingOf(share.version)).find((kind) => kind !== undefined) : undefined
  if (stateful) {
    // Cloudflare's rule: a Worker with Durable Objects runs one version at a time. This host keeps KV,
    // D1, R2 and queue data in the Worker's own Durable Object storage, so the rule covers those too.
    throw new KitError('usage', `a Worker with ${stateful} keeps one version: deploy it at 100 %`)
  }
  return shares.toSorted((a, b) => b.version.created_at - a.version.created_at || (a.version.id < b.version.id ? 1 : -1))
}

const STATEFUL_BINDINGS = [
  ['durableObjects', 'Durable Objects'],
  ['kvNamespaces', 'KV namespaces (kept in its Durable Object storage)'],
  ['d1Databases', 'D1 databases (kept in its Durable Object storage)'],
  ['r2Buckets', 'R2 buckets (kept in its Durable Object storage)'],
] as const

/** What makes a version keep state in its Worker's Durable Object storage, named for the refusal. */
function statefulBindingOf(version: VersionRow): string | undefined {
  const manifest = version.manifest as Record<string, unknown> & {queues?: {producers?: unknown[]; consumers?: unknown[]}}
  const named = STATEFUL_BINDINGS.find(([key]) => Array.isArray(manifest[key]) && (manifest[key] as unknown[]).length > 0)
  if (named) return named[1]
  const queues = [...(manifest.queues?.producers ?? []), ...(manifest.queues?.consumers ?? [])]
  return queues.length > 0 ? 'queues (kept in its Durable Object storage)' : undefined
}
