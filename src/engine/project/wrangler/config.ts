// A wrangler project (wrangler.toml, wrangler.json or wrangler.jsonc) read as a Worker project:
// wrangler's keys mapped onto edgeworker.json's, the `[env.<name>]` section applied the way
// wrangler applies it, and every key that means nothing on-prem either listed in one warning or —
// for bindings the Worker would call and find missing — refused.
import {existsSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {parse as parseJsonc, printParseErrorCode, type ParseError} from 'jsonc-parser'
import {parse as parseToml} from 'smol-toml'
import {z} from 'zod'
import {KitError} from '../../../errors.js'
import {HTML_HANDLING, NOT_FOUND_HANDLING} from '../../../protocol/management-api.js'

export const WRANGLER_FILES = ['wrangler.toml', 'wrangler.jsonc', 'wrangler.json'] as const

/** Keys wrangler reads for the cloud that have no meaning on-prem: accepted, named in one warning. */
const IGNORED_KEYS = new Set([
  '$schema',
  'account_id',
  'zone_id',
  'routes',
  'route',
  'workers_dev',
  'preview_urls',
  'usage_model',
  'placement',
  'limits',
  'observability',
  'logpush',
  'tail_consumers',
  'send_metrics',
  'legacy_env',
  'keep_vars',
  'dev',
  'build',
  'first_party_worker',
  'logfwdr',
  'compliance_region',
  'migrations',
  'workers_dev_preview',
  'streaming_tail_consumers',
])

/**
 * Bindings a Worker calls through `env`: on-prem there is nothing behind them, so the Worker would
 * fail at its first request. Refused at build time instead.
 */
const REFUSED_BINDINGS = new Set([
  'analytics_engine_datasets',
  'ai',
  'vectorize',
  'hyperdrive',
  'browser',
  'mtls_certificates',
  'dispatch_namespaces',
  'workflows',
  'send_email',
  'images',
  'pipelines',
  'secrets_store_secrets',
  'unsafe',
  'site',
  'wasm_modules',
  'text_blobs',
  'data_blobs',
  'version_metadata',
  'node_compat',
  'containers',
  'vpc_services',
])

/** wrangler's environment rule: these are inherited from the top level by `[env.<name>]`; the rest must be restated. */
const INHERITED_KEYS = new Set([
  'main',
  'compatibility_date',
  'compatibility_flags',
  'rules',
  'find_additional_modules',
  'preserve_file_names',
  'base_dir',
  'no_bundle',
  'define',
  'alias',
  'tsconfig',
  'jsx_factory',
  'jsx_fragment',
  'minify',
  'upload_source_maps',
  'triggers',
  'edgeworkers',
  'assets',
])

const ruleType = z.enum(['ESModule', 'CommonJS', 'Text', 'Data', 'CompiledWasm'])

// Not strict: keys this schema does not name are reported in a warning, not refused.
const wranglerSchema = z.object({
  name: z.string().min(1).optional(),
  main: z.string().min(1).optional(),
  compatibility_date: z.string().optional(),
  compatibility_flags: z.array(z.string()).optional(),
  vars: z.record(z.string(), z.json()).optional(),
  durable_objects: z
    .object({bindings: z.array(z.object({name: z.string(), class_name: z.string(), script_name: z.string().optional()}).passthrough())})
    .optional(),
  services: z.array(z.object({binding: z.string(), service: z.string(), entrypoint: z.string().optional(), environment: z.string().optional()})).optional(),
  /** Cron triggers the host runs (`triggers.crons`); validated with the manifest. */
  triggers: z.object({crons: z.array(z.string()).optional()}).optional(),
  /** The host keeps the namespaces (`id` names one; wrangler 4 allows none, as on-prem: then the binding names it). `preview_id` is for remote dev only. */
  kv_namespaces: z.array(z.object({binding: z.string(), id: z.string().optional(), preview_id: z.string().optional()})).optional(),
  /** The host keeps the databases (`database_id` names one, else `database_name`, else the binding). `preview_database_id` is for remote dev only. */
  d1_databases: z
    .array(
      z.object({
        binding: z.string(),
        database_name: z.string().optional(),
        database_id: z.string().optional(),
        preview_database_id: z.string().optional(),
        migrations_dir: z.string().optional(),
        migrations_table: z.string().optional(),
      }),
    )
    .optional(),
  /** The host keeps the buckets (`bucket_name` names one; none, as wrangler 4 allows: the binding, lowercased). `preview_bucket_name`, `jurisdiction` are Cloudflare's. */
  r2_buckets: z
    .array(z.object({binding: z.string(), bucket_name: z.string().optional(), preview_bucket_name: z.string().optional(), jurisdiction: z.string().optional()}))
    .optional(),
  /** The host keeps the messages; a Worker consumes the queues it produces (validated with the manifest). */
  queues: z
    .object({
      producers: z.array(z.object({binding: z.string(), queue: z.string(), delivery_delay: z.number().optional()})).optional(),
      consumers: z
        .array(
          z.object({
            queue: z.string(),
            type: z.literal('worker', {error: 'only "worker" consumers are supported on-prem (no HTTP pull)'}).optional(),
            max_batch_size: z.number().optional(),
            max_batch_timeout: z.number().optional(),
            max_retries: z.number().optional(),
            retry_delay: z.number().optional(),
            dead_letter_queue: z.string().optional(),
            max_concurrency: z.number().nullable().optional(),
          }),
        )
        .optional(),
    })
    .optional(),
  rules: z.array(z.object({type: ruleType, globs: z.array(z.string()).min(1), fallthrough: z.boolean().optional()})).optional(),
  find_additional_modules: z.boolean().optional(),
  /** Attached modules keep their import path as their name (else `<sha1>-<file name>`, as wrangler names them). */
  preserve_file_names: z.boolean().optional(),
  base_dir: z.string().optional(),
  no_bundle: z.boolean().optional(),
  minify: z.boolean().optional(),
  define: z.record(z.string(), z.string()).optional(),
  alias: z.record(z.string(), z.string()).optional(),
  tsconfig: z.string().optional(),
  jsx_factory: z.string().optional(),
  jsx_fragment: z.string().optional(),
  /** The bundle's source map goes with the version to the host, which maps Workers' stacks with it. */
  upload_source_maps: z.boolean().optional(),
  /** Static assets, served by the host (../assets/config.ts). */
  assets: z
    .object({
      directory: z.string().min(1),
      binding: z.string().min(1).optional(),
      html_handling: z.enum(HTML_HANDLING).optional(),
      not_found_handling: z.enum(NOT_FOUND_HANDLING).optional(),
      run_worker_first: z.union([z.boolean(), z.array(z.string())]).optional(),
    })
    .optional(),
  /** Our extension table: wrangler warns about an unknown top-level table but runs the project. */
  edgeworkers: z.strictObject({department: z.string().min(1).optional(), builder_policy: z.string().min(1).optional()}).optional(),
  env: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
})

/** Whether an `[env.<name>]` section inherits the top-level `key` (else it must restate it). */
export function isInheritedKey(key: string): boolean {
  return INHERITED_KEYS.has(key)
}

export type WranglerSettings = Omit<z.infer<typeof wranglerSchema>, 'env'>
export type WranglerRuleType = z.infer<typeof ruleType>

export interface LoadedWranglerConfig {
  /** The config file read (absolute). */
  file: string
  /** The config as it applies: top level, with the named environment's section applied. */
  config: WranglerSettings
  /** The environment applied, if any. */
  env: string | null
  /** The department the top level's [edgeworkers] table names: the production Worker's. */
  productionDepartment: string | null
  /** One-line notes for the operator (ignored keys). */
  warnings: string[]
}

/** The wrangler config file of a directory, or null when it has none. */
export function findWranglerConfig(dir: string): string | null {
  for (const name of WRANGLER_FILES) {
    const file = path.join(dir, name)
    if (existsSync(file)) return file
  }
  return null
}

export function loadWranglerConfig(file: string, env: string | null): LoadedWranglerConfig {
  const source = path.basename(file)
  const raw = readConfig(file, source)
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new KitError('usage', `${source}: the top level must be a table`)
  let applied = raw as Record<string, unknown>
  const productionDepartment = departmentOf(applied)
  if (env !== null) {
    const environments = (applied.env ?? {}) as Record<string, unknown>
    const section = environments[env]
    if (typeof section !== 'object' || section === null) {
      const known = Object.keys(environments)
      throw new KitError('usage', `${source} has no [env.${env}] section${known.length > 0 ? ` (it has ${known.join(', ')})` : ''}`)
    }
    // wrangler: inheritable keys fall back to the top level; bindings and vars do not.
    const inherited = Object.fromEntries(Object.entries(applied).filter(([key]) => INHERITED_KEYS.has(key)))
    const name = typeof applied.name === 'string' ? {name: `${applied.name}-${env}`} : {}
    applied = {...inherited, ...name, ...section}
    // As wrangler names an env's Worker <name>-<env>, an env's department defaults to <department>-<env>.
    if (productionDepartment !== null && departmentOf(section as Record<string, unknown>) === null) {
      const table = typeof applied.edgeworkers === 'object' && applied.edgeworkers !== null ? applied.edgeworkers : {}
      applied = {...applied, edgeworkers: {...table, department: `${productionDepartment}-${env}`}}
    }
  }
  const parsed = wranglerSchema.safeParse(applied)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    const key = [...(env === null ? [] : ['env', env]), ...issue.path].map((part, index) =>
      typeof part === 'number' ? `[${part}]` : index === 0 ? String(part) : `.${String(part)}`,
    )
    throw new KitError('usage', `${source}: key "${key.join('')}": ${issue.message}`)
  }
  const {env: _environments, ...config} = parsed.data

  const keys = Object.keys(applied).filter((key) => key !== 'env')
  const refused = keys.filter((key) => REFUSED_BINDINGS.has(key))
  if (refused.length > 0) {
    throw new KitError(
      'usage',
      `${source}: ${refused.join(', ')} ${refused.length === 1 ? 'is' : 'are'} not provided by the edge host on-prem; remove ${refused.length === 1 ? 'it' : 'them'} (a Worker using ${refused.length === 1 ? 'it' : 'them'} would fail at its first request)`,
    )
  }
  const crossScript = (config.durable_objects?.bindings ?? []).find((binding) => binding.script_name !== undefined)
  if (crossScript)
    throw new KitError(
      'usage',
      `${source}: durable object binding ${crossScript.name} names script_name ${crossScript.script_name}; only the Worker's own classes are supported`,
    )
  const ignored = keys.filter((key) => IGNORED_KEYS.has(key))
  const unknown = keys.filter((key) => !(key in wranglerSchema.shape) && !IGNORED_KEYS.has(key))
  const warnings: string[] = []
  if (ignored.length > 0) warnings.push(`${source}: ignored on-prem: ${ignored.join(', ')}`)
  if (unknown.length > 0) warnings.push(`${source}: unknown keys ignored: ${unknown.join(', ')}`)
  return {file, config, env, productionDepartment, warnings}
}

function departmentOf(table: Record<string, unknown>): string | null {
  const edgeworkers = table.edgeworkers as {department?: unknown} | undefined
  return typeof edgeworkers?.department === 'string' ? edgeworkers.department : null
}

function readConfig(file: string, source: string): unknown {
  const text = readFileSync(file, 'utf8')
  if (file.endsWith('.toml')) {
    try {
      return parseToml(text)
    } catch (error) {
      throw new KitError('usage', `${source} is not valid TOML: ${(error as Error).message.split('\n')[0]}`)
    }
  }
  const errors: ParseError[] = []
  const value: unknown = parseJsonc(text, errors, {allowTrailingComma: true, disallowComments: false})
  if (errors.length > 0) {
    const [first] = errors
    throw new KitError('usage', `${source} is not valid JSON: ${printParseErrorCode(first!.error)} at offset ${first!.offset}`)
  }
  return value
}
