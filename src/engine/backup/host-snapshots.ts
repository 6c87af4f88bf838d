// The hosts' data snapshots inside a backup, all taken under the backup's one fence. A kit of one
// host: host/snapshot.tar, as always. A kit of several (docs/many-hosts.md): the first host that
// answers goes to host/snapshot.tar (the one a restore brings back by default), every other host to
// hosts/<12 hex>.tar. Decision for a host that does not answer: the backup takes what is reachable
// and names the missing host in the manifest and the result (`hostsMissing`) — a backup refused
// whenever one machine is down would be missing exactly when it is needed; stateless Workers are
// the same on every host, and the missing host is said plainly. No host answering fails the backup.
import {mkdir} from 'node:fs/promises'
import path from 'node:path'
import {KitError} from '../../errors.js'
import {ProviderError, type EdgeProvider} from '../../provider/types.js'
import type {Engine} from '../context.js'
import {hostCallError} from '../fence/fence.js'
import {hostDown} from '../hosts/fanout.js'
import {connectMembers} from '../hosts/members.js'
import {readSnapshotManifest} from './host-snapshot.js'
import {HOST_SNAPSHOT_FILE, hostSnapshotFileOf} from './manifest.js'

export interface HostSnapshot {
  host: string
  fingerprint: string
  /** Relative to the backup directory. */
  snapshot: string
  bytes: number
}

export interface HostSnapshots {
  /** The first is host/snapshot.tar. */
  taken: HostSnapshot[]
  /** Hosts that did not answer: not in this backup. */
  missing: Array<{host: string; error: string}>
}

export async function snapshotHosts(engine: Engine, scope: string, dir: string, fenceId: string, signal?: AbortSignal): Promise<HostSnapshots> {
  const members = await connectMembers(engine.store, engine.settings, engine.hosts, scope)
  const result: HostSnapshots = {taken: [], missing: []}
  let firstDown: unknown = null
  for (const member of members) {
    const file = result.taken.length === 0 ? HOST_SNAPSHOT_FILE : hostSnapshotFileOf(member.row.host_scope)
    try {
      result.taken.push(
        await takeSnapshot(member.provider, {dir, file, fenceId, host: member.row.host_scope, fingerprint: member.row.host_fingerprint}, signal),
      )
    } catch (error) {
      // A kit of one host fails as it always did; of several, a host that is down is named and passed over.
      if (members.length === 1 || !hostDown(error)) throw error instanceof ProviderError ? snapshotFailed(error) : error
      firstDown ??= error
      result.missing.push({host: member.row.host_scope, error: (error as Error).message})
    }
  }
  if (result.taken.length === 0) throw snapshotFailed(firstDown)
  return result
}

async function takeSnapshot(
  provider: EdgeProvider,
  wanted: {dir: string; file: string; fenceId: string; host: string; fingerprint: string},
  signal?: AbortSignal,
): Promise<HostSnapshot> {
  const location = path.join(wanted.dir, wanted.file)
  await mkdir(path.dirname(location), {recursive: true, mode: 0o700})
  const {size} = await provider.downloadSnapshot(wanted.fenceId, location, signal)
  const taken = await readSnapshotManifest(location)
  if (taken.fingerprint !== wanted.fingerprint || taken.fenceId !== wanted.fenceId) {
    throw new KitError(
      'host_error',
      `the host snapshot is of host ${taken.fingerprint.slice(0, 12)} under fence ${taken.fenceId}, not of the paired host ${wanted.fingerprint.slice(0, 12)} under fence ${wanted.fenceId}`,
    )
  }
  return {host: wanted.host, fingerprint: wanted.fingerprint, snapshot: wanted.file, bytes: size}
}

function snapshotFailed(error: unknown): KitError {
  return hostCallError(error, 'the edge host data snapshot failed', 'nothing was kept')
}
