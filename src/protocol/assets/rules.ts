// The `_headers` and `_redirects` files of an assets directory, parsed as Cloudflare documents them
// (developers.cloudflare.com/workers/static-assets/headers/ and …/redirects/): the kit parses them at
// build to refuse a bad file with one line, the host parses the same text to serve by it.
//
// _redirects: `source destination [status]` per line, `#` comments; status 301, 302 (default), 303,
//   307, 308, or 200 (a rewrite to another asset path); a source may hold one `*` splat and `:name`
//   placeholders (one segment each), which the destination repeats as `:splat` and `:name`. At most
//   2,000 static and 100 dynamic rules, lines of at most 1,000 characters. A static rule wins over a
//   dynamic one, else the first matching dynamic rule wins.
// _headers: a URL pattern on its own line, then indented `Name: value` lines (`! Name` detaches a
//   header set by an earlier rule); patterns take the same splat and placeholders. At most 100
//   rules, lines of at most 2,000 characters. Every matching rule applies; repeated names join with ", ".

export interface RedirectRule {
  source: string
  destination: string
  status: number
  /** Matches a pathname; its named groups are the placeholders (`splat` for `*`). null: a static source. */
  pattern: RegExp | null
}

export interface HeaderRule {
  pattern: RegExp
  /** The host a `https://host/path` pattern names, lowercased; null: any host. */
  host: string | null
  set: Array<[string, string]>
  detach: string[]
}

export const REDIRECT_LIMITS = {static: 2_000, dynamic: 100, lineLength: 1_000} as const
export const HEADER_LIMITS = {rules: 100, lineLength: 2_000} as const
const REDIRECT_STATUSES = new Set([200, 301, 302, 303, 307, 308])

/** Thrown with a one-line reason naming the file and the line. */
export class AssetRulesError extends Error {}

export function parseRedirects(text: string): RedirectRule[] {
  const rules: RedirectRule[] = []
  let staticCount = 0
  let dynamicCount = 0
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim()
    const where = `_redirects line ${index + 1}`
    if (line === '' || line.startsWith('#')) return
    if (raw.length > REDIRECT_LIMITS.lineLength) throw new AssetRulesError(`${where} is longer than ${REDIRECT_LIMITS.lineLength} characters`)
    const fields = line.split(/\s+/)
    if (fields.length < 2 || fields.length > 3) throw new AssetRulesError(`${where}: expected "source destination [status]"`)
    const [source, destination, statusText] = fields as [string, string, string | undefined]
    const status = statusText === undefined ? 302 : Number(statusText)
    if (!REDIRECT_STATUSES.has(status)) throw new AssetRulesError(`${where}: status ${statusText} is not one of 200, 301, 302, 303, 307, 308`)
    if (!source.startsWith('/'))
      throw new AssetRulesError(`${where}: the source ${source} must be a path starting with "/" (domain-level redirects are not supported)`)
    if ((source.match(/\*/g) ?? []).length > 1) throw new AssetRulesError(`${where}: a source may hold one "*" splat`)
    if (status === 200 && !destination.startsWith('/')) throw new AssetRulesError(`${where}: a 200 rewrite must name a relative path`)
    const pattern = /[*:]/.test(source) ? compilePattern(source.split('?')[0]!) : null
    if (pattern === null) staticCount++
    else dynamicCount++
    if (staticCount > REDIRECT_LIMITS.static) throw new AssetRulesError(`_redirects holds more than ${REDIRECT_LIMITS.static} static redirects`)
    if (dynamicCount > REDIRECT_LIMITS.dynamic) throw new AssetRulesError(`_redirects holds more than ${REDIRECT_LIMITS.dynamic} dynamic redirects`)
    rules.push({source: source.split('?')[0]!, destination, status, pattern})
  })
  return rules
}

export function parseHeaders(text: string): HeaderRule[] {
  const rules: HeaderRule[] = []
  let current: HeaderRule | null = null
  text.split(/\r?\n/).forEach((raw, index) => {
    const where = `_headers line ${index + 1}`
    if (raw.trim() === '' || raw.trim().startsWith('#')) return
    if (raw.length > HEADER_LIMITS.lineLength) throw new AssetRulesError(`${where} is longer than ${HEADER_LIMITS.lineLength} characters`)
    if (!/^\s/.test(raw)) {
      const {host, path} = splitUrlPattern(raw.trim(), where)
      current = {pattern: compilePattern(path), host, set: [], detach: []}
      rules.push(current)
      if (rules.length > HEADER_LIMITS.rules) throw new AssetRulesError(`_headers holds more than ${HEADER_LIMITS.rules} rules`)
      return
    }
    if (current === null) throw new AssetRulesError(`${where}: a header line must follow a URL pattern`)
    const line = raw.trim()
    if (line.startsWith('!')) {
      current.detach.push(line.slice(1).trim().toLowerCase())
      return
    }
    const colon = line.indexOf(':')
    const name = colon === -1 ? '' : line.slice(0, colon).trim()
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new AssetRulesError(`${where}: expected "Name: value"`)
    current.set.push([name.toLowerCase(), line.slice(colon + 1).trim()])
  })
  return rules
}

/**
 * The redirect for a pathname, its destination's placeholders filled in, or null. As wrangler's
 * asset worker decides: a static rule for the exact path wins over any dynamic one, else the first
 * dynamic rule that matches; a relative destination has its repeated slashes collapsed.
 */
export function matchRedirect(rules: readonly RedirectRule[], pathname: string): {destination: string; status: number} | null {
  const exact = rules.find((rule) => rule.pattern === null && rule.source === pathname)
  if (exact) return {destination: exact.destination, status: exact.status}
  for (const rule of rules) {
    const match = rule.pattern?.exec(pathname)
    if (!match) continue
    const destination = fillPlaceholders(rule.destination, match.groups ?? {}).trim()
    return {destination: /^\w+:\/\//.test(destination) ? destination : destination.replace(/\/+/g, '/'), status: rule.status}
  }
  return null
}

/**
 * What the rules do to a response at `pathname` on `host`: every matching rule in order detaches
 * its `! Name` headers (from the response too) and sets its headers, a name set again appended
 * with ", ". `unset`: names to remove from the response that no later rule set again.
 */
export function headersFor(rules: readonly HeaderRule[], host: string, pathname: string): {set: Map<string, string>; unset: Set<string>} {
  const set = new Map<string, string>()
  const unset = new Set<string>()
  for (const rule of rules) {
    if (rule.host !== null && rule.host !== host) continue
    const match = rule.pattern.exec(pathname)
    if (!match) continue
    for (const name of rule.detach) {
      set.delete(name)
      unset.add(name)
    }
    for (const [name, value] of rule.set) {
      const filled = fillPlaceholders(value, match.groups ?? {})
      const previous = set.get(name)
      set.set(name, previous === undefined ? filled : `${previous}, ${filled}`)
      unset.delete(name)
    }
  }
  return {set, unset}
}

function splitUrlPattern(pattern: string, where: string): {host: string | null; path: string} {
  const absolute = /^https?:\/\/([^/]+)(\/.*)?$/.exec(pattern)
  if (absolute) return {host: absolute[1]!.toLowerCase(), path: absolute[2] ?? '/'}
  if (!pattern.startsWith('/')) throw new AssetRulesError(`${where}: the URL pattern ${pattern} must start with "/" or https://`)
  return {host: null, path: pattern}
}

/** `*` matches anything (as `splat`), `:name` one path segment. */
function compilePattern(source: string): RegExp {
  let pattern = ''
  for (const part of source.split(/(\*|:[A-Za-z]\w*)/)) {
    if (part === '*') pattern += '(?<splat>.*)'
    else if (/^:[A-Za-z]\w*$/.test(part)) pattern += `(?<${part.slice(1)}>[^/]+)`
    else pattern += part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')
  }
  return new RegExp(`^${pattern}$`)
}

function fillPlaceholders(template: string, groups: Record<string, string | undefined>): string {
  return template.replace(/:([A-Za-z]\w*)/g, (whole, name: string) => groups[name] ?? whole)
}
