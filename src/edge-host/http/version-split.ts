// Which release of a Worker under a gradual deployment serves a request, as Cloudflare decides it
// (developers.cloudflare.com/workers/configuration/versions-and-deployments/gradual-deployments/):
// - `Cloudflare-Workers-Version-Overrides`, a structured-field dictionary (RFC 8941) of Worker name →
//   version id string, sends the request to that version when the deployment holds it (even at 0 %);
//   anything else about the header (not a dictionary, no entry for this Worker, a version outside the
//   deployment) is ignored and the percentages decide.
// - `Cloudflare-Workers-Version-Key` pins a request to a version: the key's hash picks a point on
//   [0, 100) and the current release (the one the deployment uploaded) owns the bottom of it, so
//   raising its share from 10 % to 20 % keeps every key it already had.
// - Otherwise each request draws a point at random.
// The data plane calls splitService once per request of a script with a split; nothing else here.
import {createHash} from 'node:crypto'
import type http from 'node:http'
import {parseDictionary} from 'structured-headers'
import type {ReleaseSplit} from '../../protocol/management-api.js'
import {splitServiceName} from '../../workerd/script.js'

export const VERSION_KEY_HEADER = 'cloudflare-workers-version-key'
export const VERSION_OVERRIDES_HEADER = 'cloudflare-workers-version-overrides'

export interface SplitRoute {
  /** The kit's ids of the current release's version. */
  versionIds: readonly string[]
  /** The release served beside it, with its share; the current one serves the rest. */
  split: ReleaseSplit
}

/** workerd's name for the release that serves this request of `script` (its department: another name the overrides may use). */
export function splitService(script: string, route: SplitRoute & {department: string | null}, headers: http.IncomingHttpHeaders): string {
  const names = route.department === null ? [script] : [script, route.department]
  return chooseRelease(route, headers, names) === 'split' ? splitServiceName(script) : script
}

/**
 * `current` or `split`: which release serves this request. `workerNames` are the names the override
 * dictionary may use for the Worker (its script name, its department).
 */
export function chooseRelease(
  route: SplitRoute,
  headers: http.IncomingHttpHeaders,
  workerNames: readonly string[],
  random: () => number = Math.random,
): 'current' | 'split' {
  const overridden = overrideOf(route, headers[VERSION_OVERRIDES_HEADER], workerNames)
  if (overridden) return overridden
  const key = single(headers[VERSION_KEY_HEADER])
  const point = key === undefined ? random() * 100 : keyPoint(key)
  return point < 100 - route.split.percentage ? 'current' : 'split'
}

/** A key's fixed point on [0, 100): the first 48 bits of its SHA-256. */
export function keyPoint(key: string): number {
  return (createHash('sha256').update(key).digest().readUIntBE(0, 6) / 2 ** 48) * 100
}

function overrideOf(route: SplitRoute, header: string | string[] | undefined, workerNames: readonly string[]): 'current' | 'split' | undefined {
  const value = single(header)
  if (value === undefined) return undefined
  let dictionary: ReturnType<typeof parseDictionary>
  try {
    dictionary = parseDictionary(value)
  } catch {
    return undefined
  }
  for (const name of workerNames) {
    // An Item is [bare value, parameters]; an inner list's value is an array, never a version id.
    const versionId = dictionary.get(name)?.[0]
    if (typeof versionId !== 'string') continue
    if (route.versionIds.includes(versionId)) return 'current'
    if (route.split.versionIds.includes(versionId)) return 'split'
    return undefined
  }
  return undefined
}

/** A header given once; repeated, the first. */
function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}
