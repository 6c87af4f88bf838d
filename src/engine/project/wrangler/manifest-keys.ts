// A refusal of the edgeworker.json a wrangler project is staged into, said in the wrangler
// config's words: its file and wrangler's keys (`wrangler.toml: key "kv_namespaces[0].id" …`, not
// `edgeworker.json: key "kvNamespaces[0].id" …`), under `env.<name>.` for a key an
// `[env.<name>]` section must restate.
import {KitError} from '../../../errors.js'
import {MANIFEST_FILE} from '../manifest.js'
import {isInheritedKey} from './config.js'

/** Manifest key → wrangler key, for keys whose name differs beyond camelCase → snake_case. */
const RENAMED: Array<[RegExp, string]> = [
  [/^durableObjects\[(\d+)\]\.binding/, 'durable_objects.bindings[$1].name'],
  [/^durableObjects\[(\d+)\]\.className/, 'durable_objects.bindings[$1].class_name'],
  [/^durableObjects(\[\d+\])?/, 'durable_objects.bindings$1'],
  [/^services\[(\d+)\]\.department/, 'services[$1].service'],
  [/^d1Databases\[(\d+)\]\.id/, 'd1_databases[$1].database_id'],
  [/^crons/, 'triggers.crons'],
  [/^builderPolicy/, 'edgeworkers.builder_policy'],
]

/** The wrangler key a staged manifest key was written from. */
export function wranglerKeyOf(manifestKey: string, env: string | null): string {
  const renamed = RENAMED.find(([pattern]) => pattern.test(manifestKey))
  // A var's name is the project's own; the rest of a key is camelCase for wrangler's snake_case.
  const key = renamed
    ? manifestKey.replace(renamed[0], renamed[1])
    : manifestKey.replace(/^(vars\.)?(.*)$/, (_, vars: string | undefined, rest: string) =>
        vars ? `${vars}${rest}` : rest.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`),
      )
  const topLevel = /^[a-z_]+/.exec(key)![0]
  return env === null || isInheritedKey(topLevel) ? key : `env.${env}.${key}`
}

/** `error` restated for the wrangler config `source` when it refuses the staged edgeworker.json; else `error` as it is. */
export function inWranglerTerms(error: unknown, source: string, env: string | null): unknown {
  const prefix = `${MANIFEST_FILE}: `
  if (!(error instanceof KitError) || !error.message.startsWith(prefix)) return error
  const message = error.message
    .slice(prefix.length)
    .replace(/key "([^"]+)"/g, (_, key: string) => `key "${wranglerKeyOf(key, env)}"`)
    .replace(
      /taken by ((?:vars|durableObjects|services|kvNamespaces|d1Databases|r2Buckets|queues|assets)[\w.[\]]*)/g,
      (_, key: string) => `taken by ${wranglerKeyOf(key, env)}`,
    )
  return new KitError(error.code, `${source}: ${message}`, error.reason)
}
