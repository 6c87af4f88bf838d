// Settings as `config show` prints them: a URL keeps no password (store.url may be
// postgres://user:password@…) and a setting whose name says it holds a secret shows [redacted].
import {isSecretField, redactText, redactTree, type RedactionRule} from '../util/redact.js'

/** An empty secret setting shows as empty: there is nothing to hide, and it tells the operator it is unset. */
const SETTINGS_RULE: RedactionRule = {hides: (key, value) => isSecretField(key) && typeof value === 'string' && value !== '', text: redactText}

export function redactSettings<T>(value: T): T {
  return redactTree(value, SETTINGS_RULE) as T
}
