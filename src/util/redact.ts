// The redaction rule for anything the status view prints from a row's payload or an audit row's
// facts. The kit never writes a secret value there (only digests) — this is the second line: a field
// whose name says it carries a secret shows `[redacted]` whatever it holds, and a URL keeps no
// password (redactedUrl). Digests of secrets are not secrets and stay visible,
// so an operator can still compare them.
import type {JsonValue} from '../store/schema.js'

export const REDACTED = '[redacted]'

/** A database URL safe to print: the password removed. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url)
    parsed.password = ''
    return parsed.toString()
  } catch {
    return 'postgres://(unparseable URL)'
  }
}

const SECRET_NAME = /secret|passw(or)?d|passphrase|token|api[_-]?key|credential|authorization|cookie|private[_-]?key|signature/i
const DIGEST_NAME = /(digest|sha256|fingerprint)$/i
const URL_WITH_PASSWORD = /^[a-z][a-z0-9+.-]*:\/\/[^/\s:@]*:[^/\s@]*@/i
const URL_PASSWORD_ANYWHERE = /\b([a-z][a-z0-9+.-]*:\/\/[^/\s:@]*:)[^/\s@]*@/gi

/** Secret values shorter than this are not searched for (they would mangle ordinary text). */
const MIN_REDACTED_SECRET_LENGTH = 4

/**
 * The redaction of every text a Worker produced (console lines, exceptions, paths — in a tail, the
 * Worker log file or the host's own log): each of `secretValues` replaced by `[redacted]`, then
 * every URL's password (redactText). Built once per set of values; the longest value wins where
 * two overlap.
 */
export function secretRedactor(secretValues: readonly string[]): (text: string) => string {
  const secrets = [...new Set(secretValues.filter((value) => value.length >= MIN_REDACTED_SECRET_LENGTH))].sort((a, b) => b.length - a.length)
  if (secrets.length === 0) return redactText
  const pattern = new RegExp(secrets.map((secret) => secret.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')).join('|'), 'g')
  return (text) => redactText(text.replace(pattern, REDACTED))
}

/** The password of every URL inside free text (a log line, an error message) replaced. */
export function redactText(text: string): string {
  return text.replace(URL_PASSWORD_ANYWHERE, (_match, head: string) => `${head}${REDACTED}@`)
}

export function isSecretField(name: string): boolean {
  return SECRET_NAME.test(name) && !DIGEST_NAME.test(name)
}

/** What a redacting walk hides and how it cleans the text it keeps. */
export interface RedactionRule {
  /** The value of a field named `key` (or an item of an array so named) is replaced whole by REDACTED. */
  hides(key: string, value: unknown): boolean
  /** What a string kept becomes. */
  text(text: string): string
}

/**
 * A copy of `value` with the rule applied to every field of its plain objects and arrays, nested
 * included; array items are judged by the array's field name. Other objects (errors, buffers, dates)
 * are left as they are.
 */
export function redactTree(value: unknown, rule: RedactionRule, key = ''): unknown {
  if (typeof value === 'string') return rule.text(value)
  if (Array.isArray(value)) return value.map((item) => (rule.hides(key, item) ? REDACTED : redactTree(item, rule, key)))
  if (!isPlainObject(value)) return value
  return Object.fromEntries(Object.entries(value).map(([name, inner]) => [name, rule.hides(name, inner) ? REDACTED : redactTree(inner, rule, name)]))
}

/** Payloads and audit facts: a secret-named field goes whole, whatever it holds; a URL loses its password. */
const STORED_JSON_RULE: RedactionRule = {
  hides: (key, value) => isSecretField(key) && value !== null,
  text: (text) => (URL_WITH_PASSWORD.test(text) ? redactedUrl(text) : text),
}

/** A copy of `value` with every secret-bearing field replaced; arrays and nested objects included. */
export function redactSecrets<T extends JsonValue>(value: T): T {
  return redactTree(value, STORED_JSON_RULE) as T
}

/** An object literal or a parsed document's table (TOML tables have no prototype). */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false
  const prototype = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
}
