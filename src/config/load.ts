// Effective configuration: flags > EDGEWORKERS_* environment > config file > defaults, validated once
// with zod. Every leaf remembers which layer it came from, so `config show` can say so.
import {existsSync, readFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parse as parseToml} from 'smol-toml'
import type {z} from 'zod'
import {FENCE_RUN_ENV} from './fence-environment.js'
import {didYouMean} from '../did-you-mean.js'
import {KitError} from '../errors.js'
import {settingsSchema, type Settings} from './schema.js'
import {parseStrictJson} from '../util/strict-json.js'
import {assertPrivate} from '../util/private-files.js'
import {redactSettings} from './redact.js'

export type ConfigSource = 'flag' | 'env' | 'file' | 'default'
type Tree = {[key: string]: unknown}

export interface LoadedConfig {
  settings: Settings
  /** Dotted leaf path (e.g. `deploy.lease_seconds`) → the layer its value came from. */
  sources: Record<string, ConfigSource>
  /** The config file read, or null when none exists at the default location. */
  configFile: string | null
}

export interface ConfigInputs {
  /** Dotted path → value, from command-line flags. */
  flags?: Record<string, unknown>
  configPath?: string
  env?: NodeJS.ProcessEnv
}

const ENV_PREFIX = 'EDGEWORKERS_'
/** EDGEWORKERS_* variables that are not settings. */
const NON_SETTING_ENV = new Set(['EDGEWORKERS_CONFIG', 'EDGEWORKERS_TEST_PG_URL', 'EDGEWORKERS_FAULT', 'EDGEWORKERS_DEBUG', ...Object.values(FENCE_RUN_ENV)])

export const DEFAULT_CONFIG_FILE = 'edgeworkers.toml'

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_DATA_HOME?.trim()
  return path.join(xdg ? xdg : path.join(os.homedir(), '.local', 'share'), 'edgeworkers')
}

/** `deploy.lease_seconds` → `EDGEWORKERS_DEPLOY__LEASE_SECONDS`; `data_dir` → `EDGEWORKERS_DATA_DIR`. */
export function envNameFor(dottedPath: string): string {
  return ENV_PREFIX + dottedPath.split('.').join('__').toUpperCase()
}

export function loadConfig(inputs: ConfigInputs = {}): LoadedConfig {
  const env = inputs.env ?? process.env
  const flagTree = treeFromDotted(inputs.flags ?? {})
  const envTree = readEnv(env)

  const explicitPath = inputs.configPath ?? env.EDGEWORKERS_CONFIG
  const provisionalDataDir = (flagTree.data_dir ?? envTree.data_dir ?? defaultDataDir(env)) as string
  const configFile = explicitPath ? path.resolve(explicitPath) : path.join(path.resolve(provisionalDataDir), DEFAULT_CONFIG_FILE)
  if (explicitPath && !existsSync(configFile)) {
    throw new KitError('config_invalid', `config file ${configFile} does not exist`)
  }
  const fileTree = existsSync(configFile) ? readConfigFile(configFile) : {}
  // A config file that names a password is a secret-holding file.
  if (JSON.stringify(redactSettings(fileTree)) !== JSON.stringify(fileTree)) assertPrivate(configFile, 'file')

  const merged = deepMerge(deepMerge(fileTree, envTree), flagTree)
  const parsed = settingsSchema.safeParse(merged)
  if (!parsed.success) throw new KitError('config_invalid', describeZodError(parsed.error, configFile))
  const settings = parsed.data
  settings.data_dir = path.resolve(settings.data_dir || defaultDataDir(env))

  const sources: Record<string, ConfigSource> = {}
  for (const leaf of leafPaths(settings)) {
    sources[leaf] = has(flagTree, leaf) ? 'flag' : has(envTree, leaf) ? 'env' : has(fileTree, leaf) ? 'file' : 'default'
  }
  return {settings, sources, configFile: existsSync(configFile) ? configFile : null}
}

function readConfigFile(file: string): Tree {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new KitError('config_invalid', `config file ${file} cannot be read: ${(error as NodeJS.ErrnoException).code ?? error}`)
  }
  try {
    const value: unknown = file.endsWith('.json') ? parseStrictJson(text) : parseToml(text)
    if (!isTree(value)) throw new Error('the top level must be a table')
    return value
  } catch (error) {
    const reason = (error as Error).message.split('\n')[0]
    throw new KitError('config_invalid', `config file ${file} is malformed: ${reason}`)
  }
}

function readEnv(env: NodeJS.ProcessEnv): Tree {
  const known = new Set(leafPaths(settingsSchema.parse({})))
  const flat: Record<string, unknown> = {}
  for (const [name, raw] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || NON_SETTING_ENV.has(name) || raw === undefined) continue
    const dotted = name.slice(ENV_PREFIX.length).toLowerCase().split('__').join('.')
    if (!known.has(dotted)) throw new KitError('config_invalid', `${name}: unknown setting (no key ${dotted})`)
    flat[dotted] = parseEnvValue(raw)
  }
  return treeFromDotted(flat)
}

/** Numbers, booleans and arrays are written as JSON in the environment; anything else is a string. */
function parseEnvValue(raw: string): unknown {
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/** Every problem at once, on one line, so a file with two typos needs one edit round, not two. */
function describeZodError(error: z.ZodError, configFile: string): string {
  const problems = error.issues.map((issue) => {
    const where = issue.path.length > 0 ? issue.path.join('.') : '(top level)'
    const message = issue.code === 'unrecognized_keys' ? unknownKeys(issue.keys, issue.path) : issue.message
    return `${where}: ${message}`
  })
  return `invalid setting ${problems.join('; ')} (flags, EDGEWORKERS_* environment or ${configFile})`
}

/** `unknown key loglevel (did you mean log_level?)`, naming every unknown key of the table. */
function unknownKeys(keys: string[], at: PropertyKey[]): string {
  let table: unknown = settingsSchema.parse({})
  for (const segment of at) table = isTree(table) ? table[String(segment)] : undefined
  const known = isTree(table) ? Object.keys(table) : []
  const named = keys.map((key) => {
    const suggestion = didYouMean(key, known)
    return suggestion ? `${key} (did you mean ${suggestion}?)` : key
  })
  return `unknown key${keys.length > 1 ? 's' : ''} ${named.join(', ')}`
}

function treeFromDotted(flat: Record<string, unknown>): Tree {
  const tree: Tree = {}
  for (const [dotted, value] of Object.entries(flat)) {
    if (value === undefined) continue
    const keys = dotted.split('.')
    let node = tree
    for (const key of keys.slice(0, -1)) node = (node[key] ??= {}) as Tree
    node[keys.at(-1)!] = value
  }
  return tree
}

function deepMerge(base: Tree, over: Tree): Tree {
  const out: Tree = {...base}
  for (const [key, value] of Object.entries(over)) {
    const prior = out[key]
    out[key] = isTree(prior) && isTree(value) ? deepMerge(prior, value) : value
  }
  return out
}

export function leafPaths(value: unknown, prefix = ''): string[] {
  if (!isTree(value)) return [prefix]
  return Object.entries(value).flatMap(([key, child]) => leafPaths(child, prefix ? `${prefix}.${key}` : key))
}

function has(tree: Tree, dotted: string): boolean {
  let node: unknown = tree
  for (const key of dotted.split('.')) {
    if (!isTree(node) || !(key in node)) return false
    node = node[key]
  }
  return true
}

function isTree(value: unknown): value is Tree {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
