// What `versions deploy <worker> A@90 B@10` and `deploy --percentage P` ask for: a deployment of at
// most two versions whose percentages add up to 100, as wrangler's `versions deploy` takes it
// (`<version>@<percentage>`, the `%` optional). One rule, here, for every way of asking, and the
// plan it turns into: which version's release the deploy uploads, and which served one it keeps
// beside it (docs/gradual-deployments.md).
import {KitError} from '../../errors.js'
import type {VersionRow, VersionSplit} from '../../store/index.js'
import {namedVersion} from './names.js'

type ShareVersion = Pick<VersionRow, 'id' | 'release_generation' | 'manifest' | 'created_at'>

export interface DeploymentShare<V extends ShareVersion = VersionRow> {
  version: V
  percentage: number
}

/** What a change of deployment does: serve `target`'s release, alone (split null) or beside a version served now. */
export interface DeploymentPlan {
  target: VersionRow
  split: VersionSplit | null
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

/**
 * The plan for shares (newest first) against what the Worker serves now. A split keeps one version
 * the host serves already and uploads the other: the one not served, or the newer when both are, so
 * it keeps the bottom of the key space as its share grows (see edge-host/http/version-split.ts).
 */
export function planDeployment(shares: DeploymentShare[], versions: VersionRow[], current: VersionRow | undefined): DeploymentPlan {
  const [first, second] = shares
  if (!second) return {target: first!.version, split: null}
  const served = servedVersions(versions, current)
  const servedAs = (share: DeploymentShare) => served.find((version) => version.release_generation === share.version.release_generation)
  const [uploaded, kept] = servedAs(second) ? [first!, second] : servedAs(first!) ? [second, first!] : [undefined, undefined]
  if (!uploaded || !kept) {
    throw new KitError(
      'usage',
      `a split keeps a version the Worker serves now (${served.map((version) => version.id).join(', ') || 'none'}): name it as one of the two`,
    )
  }
  const beside = servedAs(kept)!
  return {
    target: uploaded.version,
    split: {percentage: uploaded.percentage, beside: {version_id: beside.id, release_generation: beside.release_generation, percentage: kept.percentage}},
  }
}

/** `deploy --percentage P`: the new build at P beside the version served now with another release; 100 deploys it alone. */
export function percentageSplit(built: ShareVersion, versions: VersionRow[], current: VersionRow | undefined, percentage: number): VersionSplit | null {
  if (percentage === 100) return null
  const beside = servedVersions(versions, current).find((version) => version.release_generation !== built.release_generation)
  if (!beside) throw new KitError('usage', 'a split needs a version the Worker serves now with another release: deploy this one at 100 first')
  checkedDeployment<ShareVersion>([
    {version: built, percentage},
    {version: beside, percentage: 100 - percentage},
  ])
  return {percentage, beside: {version_id: beside.id, release_generation: beside.release_generation, percentage: 100 - percentage}}
}

/** Whether serving `target` with `split` is what the Worker serves now. */
export function isServedNow(current: VersionRow | undefined, target: Pick<VersionRow, 'release_generation'>, split: VersionSplit | null): boolean {
  if (current?.release_generation !== target.release_generation) return false
  if (!current.split || !split) return current.split === split
  return current.split.percentage === split.percentage && current.split.beside.release_generation === split.beside.release_generation
}

/** The versions the Worker serves now: its current one, and the one a split keeps beside it. */
export function servedVersions(versions: VersionRow[], current: VersionRow | undefined): VersionRow[] {
  if (!current) return []
  const beside = current.split && versions.find((version) => version.id === current.split!.beside.version_id)
  return beside ? [current, beside] : [current]
}

function checkedDeployment<V extends ShareVersion>(shares: DeploymentShare<V>[]): DeploymentShare<V>[] {
  if (shares.some((share) => !Number.isInteger(share.percentage) || share.percentage < 0 || share.percentage > 100)) {
    throw new KitError('usage', 'a percentage is a whole number from 0 to 100')
  }
  const total = shares.reduce((sum, share) => sum + share.percentage, 0)
  if (total !== 100) throw new KitError('usage', `the percentages add up to ${total}; they must add up to 100`)
  const [first, second] = shares
  if (second && first!.version.release_generation === second.version.release_generation) {
    throw new KitError('usage', `${first!.version.id} and ${second.version.id} are the same release; name two different versions`)
  }
  if (second && shares.some((share) => hasDurableObjects(share.version))) {
    // Cloudflare gives each Durable Object of a split one version, chosen by the percentages
    // (developers.cloudflare.com/workers/versions-and-deployments/gradual-deployments/with-durable-objects/);
    // this host runs a class in one release only, so a Worker with Durable Objects keeps one version.
    // KV, D1, R2 and queue data is the Worker's whatever the version (Cloudflare does not version
    // it), and both releases of a split reach it; each serves its own static assets.
    throw new KitError('usage', 'a Worker with Durable Objects keeps one version: deploy it at 100 %')
  }
  return shares.toSorted((a, b) => b.version.created_at - a.version.created_at || (a.version.id < b.version.id ? 1 : -1))
}

function hasDurableObjects(version: ShareVersion): boolean {
  const {durableObjects} = version.manifest as {durableObjects?: unknown}
  return Array.isArray(durableObjects) && durableObjects.length > 0
}
