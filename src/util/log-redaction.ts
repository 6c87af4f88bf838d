// What every logger of the kit and the host is built with, so no log line carries a password: a
// URL's password is replaced in messages, in fields and in serialized errors, and a field whose name
// says it holds a secret is replaced whole (the rule of ./redact.ts).
import pino, {type LoggerOptions} from 'pino'
import {isSecretField, redactText, redactTree, type RedactionRule} from './redact.js'

export function redactingLogOptions(): Pick<LoggerOptions, 'hooks' | 'formatters' | 'serializers'> {
  return {
    hooks: {
      logMethod(args, method) {
        // logger.error(err) takes its message from the error: give it the redacted one.
        const [first, second] = args as unknown[]
        if (first instanceof Error && typeof second !== 'string') return method.apply(this, [first, redactText(first.message)] as Parameters<typeof method>)
        return method.apply(this, args.map((arg) => (typeof arg === 'string' ? redactText(arg) : arg)) as Parameters<typeof method>)
      },
    },
    formatters: {log: (object) => redactFields(object) as Record<string, unknown>},
    // The standard serializer's result has its own prototype: copy its fields into a plain object.
    serializers: {err: (error: Error) => redactFields({...pino.stdSerializers.err(error)})},
  }
}

/** A secret-named field's string goes whole; errors are left to the err serializer (redactTree skips them). */
const LOG_RULE: RedactionRule = {hides: (key, value) => isSecretField(key) && typeof value === 'string', text: redactText}

function redactFields(value: unknown): unknown {
  return redactTree(value, LOG_RULE)
}
