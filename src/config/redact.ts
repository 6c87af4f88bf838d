// Settings as `config show` prints them: a URL keeps no password (store.url may be
// postgres://user:password@…) and a setting whose name says it holds a secret shows [redacted].
import {isSecretField, REDACTED, redactText} from '../util/redact.js'

export function redactSettings<T>(value: T, key = ''): T {
  if (typeof value === 'string') return (isSecretField(key) && value !== '' ? REDACTED : redactText(value)) as T
  if (Array.isArray(value)) return value.map((item) => redactSettings(item, key)) as T
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([name, inner]) => [name, redactSettings(inner, name)])) as T
  }
  return value
}
