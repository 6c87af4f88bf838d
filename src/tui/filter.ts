// The `/` filter of the status view: space-separated terms, all of which a row must match.
//   op:deploy  status:failed  code:edge_host_5xx  script:dw-3f2a  id:3f2b9c1e  plain words
// `key:value` terms compare one field (code and script by prefix, id by prefix); plain words match
// anywhere in the row's text. Unknown keys and values are refused with a message, never guessed.
import {OUTBOX_OPERATIONS, OUTBOX_STATUSES} from '../store/schema.js'

export const FILTER_KEYS = ['op', 'status', 'code', 'script', 'id'] as const
type FilterKey = (typeof FILTER_KEYS)[number]

/** What a row offers the filter: the fields a `key:` term compares, and its text for plain words. */
export interface Filterable {
  op?: string | null
  status?: string | null
  code?: string | null
  script?: string | null
  id?: string | null
  text: string
}

export interface RowFilter {
  /** As typed, for the view to show. */
  source: string
  matches(row: Filterable): boolean
}

export type FilterParse = {ok: true; filter: RowFilter | null} | {ok: false; error: string}

const KEY_ALIASES: Record<string, FilterKey> = {op: 'op', operation: 'op', status: 'status', code: 'code', error: 'code', script: 'script', id: 'id'}
const PREFIX_KEYS: ReadonlySet<FilterKey> = new Set(['code', 'script', 'id'])

/** null filter = show everything (an empty query clears the filter). */
export function parseFilter(query: string): FilterParse {
  const terms = query.trim().split(/\s+/).filter(Boolean)
  if (terms.length === 0) return {ok: true, filter: null}
  const checks: Array<(row: Filterable) => boolean> = []
  for (const term of terms) {
    const colon = term.indexOf(':')
    if (colon < 0) {
      const word = term.toLowerCase()
      checks.push((row) => row.text.toLowerCase().includes(word))
      continue
    }
    const rawKey = term.slice(0, colon).toLowerCase()
    const value = term.slice(colon + 1)
    const key = KEY_ALIASES[rawKey]
    if (!key) return {ok: false, error: `unknown filter key "${rawKey}:" — use ${FILTER_KEYS.map((name) => `${name}:`).join(', ')} or plain words`}
    if (value === '') return {ok: false, error: `filter term "${term}" needs a value after the colon`}
    if (key === 'op' && !(OUTBOX_OPERATIONS as readonly string[]).includes(value)) {
      return {ok: false, error: `unknown operation "${value}" — one of ${OUTBOX_OPERATIONS.join(', ')}`}
    }
    if (key === 'status' && !(OUTBOX_STATUSES as readonly string[]).includes(value)) {
      return {ok: false, error: `unknown status "${value}" — one of ${OUTBOX_STATUSES.join(', ')}`}
    }
    const wanted = value.toLowerCase()
    checks.push((row) => {
      const field = row[key]?.toLowerCase()
      if (field === undefined || field === null) return false
      return PREFIX_KEYS.has(key) ? field.startsWith(wanted) : field === wanted
    })
  }
  return {ok: true, filter: {source: terms.join(' '), matches: (row) => checks.every((check) => check(row))}}
}
