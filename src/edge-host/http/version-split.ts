// Which version of a Worker under a gradual deployment serves a request, as Cloudflare decides it
// (developers.cloudflare.com/workers/versions-and-deployments/):
// - `Cloudflare-Workers-Version-Overrides`, a structured-field dictionary (RFC 8941) of Worker name →
//   version id string, sends the request to that version when the deployment holds it (even at 0 %);
//   anything else about the header (not a dictionary, no entry for this Worker, a version outside the
//   deployment) is ignored and the percentages decide.
// - `Cloudflare-Workers-Version-Key` pins a request to a version: the key's hash picks a point on
//   [0, 100) and the newer version owns the bottom of it, so raising its share from 10 % to 20 % keeps
//   every key it already had ("users … will remain on it").
// - Otherwise each request draws a point at random.
import {createHash} from 'node:crypto'
import {parseDictionary} from 'structured-headers'

export const VERSION_KEY_HEADER = 'cloudflare-workers-version-key'
export const VERSION_OVERRIDES_HEADER = 'cloudflare-workers-version-overrides'

export interface DeployedVersion {
  versionId: string
  releaseGeneration: string
  /** 0–100; the versions of a deployment add up to 100. */
  percentage: number
}

/** One or two versions, the newer first: it owns the bottom `percentage` of the key space. */
export type Deployment = readonly [DeployedVersion] | readonly [DeployedVersion, DeployedVersion]

export interface SplitRequest {
  /** The header values as Node gives them (lowercase names). */
  headers: Readonly<Record<string, string | string[] | undefined>>
  /** The names the override dictionary may use for this Worker (its script name, its department). */
  workerNames: readonly string[]
}

export function chooseVersion(deployment: Deployment, request: SplitRequest, random: () => number = Math.random): DeployedVersion {
  if (deployment.length === 1) return deployment[0]
  const overridden = overrideOf(request, deployment)
  if (overridden) return overridden
  const key = single(request.headers[VERSION_KEY_HEADER])
  const point = key === undefined ? random() * 100 : keyPoint(key)
  return point < deployment[0].percentage ? deployment[0] : deployment[1]
}

/** A key's fixed point on [0, 100): the first 48 bits of its SHA-256. */
export function keyPoint(key: string): number {
  return (createHash('sha256').update(key).digest().readUIntBE(0, 6) / 2 ** 48) * 100
}

function overrideOf(request: SplitRequest, deployment: Deployment): DeployedVersion | undefined {
  const header = single(request.headers[VERSION_OVERRIDES_HEADER])
  if (header === undefined) return undefined
  let dictionary: ReturnType<typeof parseDictionary>
  try {
    dictionary = parseDictionary(header)
  } catch {
    return undefined
  }
  for (const name of request.workerNames) {
    const member = dictionary.get(name)
    // An Item is [bare value, parameters]; an inner list's value is an array, never a version id.
    const versionId = member?.[0]
    if (typeof versionId === 'string') return deployment.find((version) => version.versionId === versionId)
  }
  return undefined
}

/** A header given once; repeated, the first (Node joins most repeated headers with ", "). */
function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}
