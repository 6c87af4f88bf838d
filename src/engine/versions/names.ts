// How operators name a version of a Worker: `versions show|diff`, `rollback --to` and
// `versions deploy` all resolve names with this one rule.
import {KitError} from '../../errors.js'
import type {VersionRow} from '../../store/index.js'

/** A version by id, unique id prefix (git's rule, at least 4 characters), or tag (the newest version carrying it). */
export function namedVersion(versions: VersionRow[], name: string): VersionRow {
  const typed = name.trim().toLowerCase()
  const exact = versions.find((version) => version.id === typed)
  if (exact) return exact
  const tagged = versions.filter((version) => version.tag === name)
  if (tagged.length > 0) return tagged.at(-1)!
  const matches = typed.length >= 4 ? versions.filter((version) => version.id.startsWith(typed)) : []
  if (matches.length === 1) return matches[0]!
  if (matches.length > 1) throw new KitError('usage', `version ${name} is ambiguous: ${matches.map((version) => version.id).join(', ')}; give more characters`)
  throw new KitError('not_found', `version ${name} not found (give a version id, a unique prefix of at least 4 characters, or a tag)`)
}
