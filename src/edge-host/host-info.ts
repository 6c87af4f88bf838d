// host.json: where a running host says how to reach it (its pid, URLs, scope), for `host status`,
// the CLI and tests; written once the host serves, removed when it stops.
import {readFile, rm} from 'node:fs/promises'
import path from 'node:path'
import {writeFileAtomically} from '../util/atomic-file.js'

const HOST_INFO_FILE = 'host.json'

/** What host.json holds while the host runs. */
export interface HostInfo {
  pid: number
  dataDir: string
  publicUrl: string
  adminUrl: string
  baseDomain: string
  /** The front door that owns the data-plane listener (host.front as this start resolved it). */
  front: 'node' | 'haproxy'
  fingerprint: string
  scope: string
  startedAt: string
}

/** Writes host.json; the returned function removes it. */
export async function writeHostInfo(dataDir: string, info: HostInfo): Promise<() => Promise<void>> {
  await writeFileAtomically(path.join(dataDir, HOST_INFO_FILE), `${JSON.stringify(info, null, 2)}\n`)
  return () => rm(path.join(dataDir, HOST_INFO_FILE), {force: true})
}

/** Reads host.json of a running host, or null when none runs there. */
export async function readHostInfo(dataDir: string): Promise<HostInfo | null> {
  try {
    return JSON.parse(await readFile(path.join(dataDir, HOST_INFO_FILE), 'utf8')) as HostInfo
  } catch {
    return null
  }
}
