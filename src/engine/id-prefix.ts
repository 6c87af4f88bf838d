// Ids as git and docker take them: the full id, or any unique prefix of at least 4 characters (the
// 8-character ids the status view shows). An ambiguous prefix is one line naming the candidates.
import {KitError} from '../errors.js'

const MIN_PREFIX = 4
const SHOWN_CANDIDATES = 5

/** The one id `typed` names; `startingWith` lists ids with a prefix (at most the limit given). */
export async function resolveIdPrefix(what: string, typed: string, startingWith: (prefix: string, limit: number) => Promise<string[]>): Promise<string> {
  const prefix = typed.trim().toLowerCase()
  const matches = prefix.length >= MIN_PREFIX ? await startingWith(prefix, SHOWN_CANDIDATES + 1) : []
  if (matches.includes(prefix)) return prefix
  if (matches.length === 1) return matches[0]!
  if (matches.length === 0) {
    const hint = prefix.length < MIN_PREFIX ? ` (give at least ${MIN_PREFIX} characters of the id)` : ''
    throw new KitError('not_found', `${what} ${typed} not found${hint}`)
  }
  const shown = matches.slice(0, SHOWN_CANDIDATES).join(', ')
  const more = matches.length > SHOWN_CANDIDATES ? ', …' : ''
  throw new KitError('usage', `${what} id prefix ${typed} is ambiguous: ${shown}${more}; give more characters`)
}

/** `startingWith` over ids already at hand (a Worker's versions, a department's accounts), in their order. */
export function idsStartingWith(ids: readonly string[]): (prefix: string, limit: number) => Promise<string[]> {
  return (prefix, limit) => Promise.resolve(ids.filter((id) => id.toLowerCase().startsWith(prefix)).slice(0, limit))
}

/** As resolveIdPrefix, but null when no id matches (an ambiguous prefix still throws). */
export function resolveIdPrefixOrNull(what: string, typed: string, startingWith: (prefix: string, limit: number) => Promise<string[]>): Promise<string | null> {
  return resolveIdPrefix(what, typed, startingWith).catch((error: unknown) => {
    if (error instanceof KitError && error.code === 'not_found') return null
    throw error
  })
}
