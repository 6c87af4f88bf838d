// Which front door a host runs (host.front): "node" (the Node data plane owns the listener), "haproxy" (an
// HAProxy child does: ./front.ts), or "auto" — HAProxy when a haproxy new enough for ./haproxy-config.ts is
// installed, else Node. Decided once per start.
import {execFile} from 'node:child_process'
import {accessSync, constants} from 'node:fs'
import path from 'node:path'
import {promisify} from 'node:util'
import {KitError} from '../../errors.js'

/** The oldest HAProxy whose configuration language ./haproxy-config.ts is written in (an LTS line, 2021). */
export const MIN_HAPROXY_VERSION = {major: 2, minor: 4} as const
/** Where distributions put haproxy (sbin is not on every user's PATH). */
const SBIN_DIRECTORIES = ['/usr/sbin', '/usr/local/sbin', '/sbin']
/** `haproxy -v` answers at once; a binary that does not is not one to run. */
const VERSION_TIMEOUT_MS = 5_000

export type FrontSetting = 'node' | 'haproxy' | 'auto'

/** Where to look for haproxy: the PATH (its directories) and the directories after it. */
export interface HaproxySearch {
  path: string
  directories: readonly string[]
}

export type FrontChoice =
  | {front: 'haproxy'; binary: string; version: string}
  /** `reason`: why "auto" did not take HAProxy (absent when the setting said "node"). */
  | {front: 'node'; reason?: string}

/** This process's PATH, then the sbin directories. */
function defaultSearch(): HaproxySearch {
  return {path: process.env.PATH ?? '', directories: SBIN_DIRECTORIES}
}

/** The haproxy binary: on the PATH, or in one of the search's other directories; null if none. */
export function findHaproxy(search: HaproxySearch = defaultSearch()): string | null {
  for (const directory of [...search.path.split(path.delimiter), ...search.directories]) {
    if (directory === '') continue
    const candidate = path.join(directory, 'haproxy')
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {}
  }
  return null
}

/** The version `binary -v` reports (`2.6.12-1+deb12u1`), or null when it does not say one. */
async function haproxyVersion(binary: string): Promise<string | null> {
  try {
    const {stdout} = await promisify(execFile)(binary, ['-v'], {timeout: VERSION_TIMEOUT_MS})
    return /HA-?Proxy version (\d+\.\d+\S*)/.exec(stdout)?.[1] ?? null
  } catch {
    return null
  }
}

function recentEnough(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map((part) => Number.parseInt(part, 10))
  return major > MIN_HAPROXY_VERSION.major || (major === MIN_HAPROXY_VERSION.major && minor >= MIN_HAPROXY_VERSION.minor)
}

/**
 * Resolves host.front for this start. "haproxy" without a usable haproxy is a configuration error; "auto" falls
 * back to Node and says why.
 */
export async function chooseFront(setting: FrontSetting, search: HaproxySearch = defaultSearch()): Promise<FrontChoice> {
  if (setting === 'node') return {front: 'node'}
  const minimum = `${MIN_HAPROXY_VERSION.major}.${MIN_HAPROXY_VERSION.minor}`
  const binary = findHaproxy(search)
  const version = binary === null ? null : await haproxyVersion(binary)
  const problem =
    binary === null
      ? `no haproxy binary on PATH${search.directories.length > 0 ? ` or in ${search.directories.join(', ')}` : ''}`
      : version === null
        ? `${binary} -v reports no HAProxy version`
        : recentEnough(version)
          ? null
          : `${binary} is HAProxy ${version}, older than ${minimum}`
  if (problem === null) return {front: 'haproxy', binary: binary!, version: version!}
  if (setting === 'auto') return {front: 'node', reason: problem}
  throw new KitError('config_invalid', `host.front = "haproxy": ${problem} (Debian: apt-get install haproxy)`)
}
