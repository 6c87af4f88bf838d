// `edgeworkers backup restore <dir> [--host-data-dir D]`. Everything that can refuse does so before
// anything changes: the manifest and every digest, the store backend and schema, the host snapshot's
// own manifest, the target directories. Then, in this order:
// 1. artifacts into the artifact store (content-addressed: adding files changes nothing in use);
// 2. with --host-data-dir, the host snapshot extracted there (a data dir `host serve` starts from);
// 3. the store, replaced whole, with the scope's `restore_pending` gate already closed in the
//    restored rows (and the backup's fence recorded as ended) — the commit point;
// 4. verification against the host (./verify.ts) — unless the host was restored into a new data dir
//    and so cannot be running yet: then a reconcile pass verifies once it is started.
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {FileArtifactStore, parseArtifactKey} from '../../artifacts/store.js'
import type {Settings} from '../../config/schema.js'
import {KitError} from '../../errors.js'
import type {HostConnector} from '../../provider/types.js'
import {openStoreBackup} from '../../store/backup/index.js'
import {openStore, storeTarget} from '../../store/index.js'
import {createEngine, type EngineLogger} from '../context.js'
import {createPrivateDirectory, discardDirectory, freshDirectory, type FreshDirectory} from './directories.js'
import {extractSnapshot, readSnapshotManifest} from './host-snapshot.js'
import {ARTIFACTS_DIR, readVerifiedManifest, STORE_DIR, type BackupManifest} from './manifest.js'
import {verifyRestore, type RestoreVerification} from './verify.js'

export type RestoreStage = 'artifacts' | 'host' | 'store' | 'verify'

/** How a fence the backup was taken under ends in the restored store. */
export const RESTORED_FENCE_END_REASON = 'restored'
/** The code of a restore that waits for its restored host to be started. */
export const HOST_NOT_STARTED = 'edge_host_not_started'

export interface RestoreInput {
  dir: string
  /** Extract the host snapshot here (new or empty; no host may run on it). */
  hostDataDir?: string
  /** A kit of several hosts: whose snapshot to extract (its scope or 12 hex; default the backup's first host). */
  host?: string
}

export interface RestoreResult {
  dir: string
  backupCreatedAt: string
  fenceId: string
  scope: string
  hostFingerprint: string
  store: {backend: string; location: string; tables: number; rows: number}
  artifacts: number
  hostDataDir: string | null
  verification: RestoreVerification
}

export async function restoreBackup(
  settings: Settings,
  input: RestoreInput,
  options: {log: EngineLogger; hosts: HostConnector; onStage?: (stage: RestoreStage) => void},
): Promise<RestoreResult> {
  const stage = options.onStage ?? (() => {})
  const dir = path.resolve(input.dir)
  const manifest = await readVerifiedManifest(dir)
  const target = storeTarget(settings)
  if (target.backend !== manifest.store.backend) {
    throw new KitError(
      'usage',
      `the backup holds a ${manifest.store.backend} store and the configured store (${target.location}) is ${target.backend}; restore into a ${manifest.store.backend} store`,
    )
  }
  const chosen = chosenSnapshot(manifest, input.host)
  const hostSnapshot = path.join(dir, chosen.snapshot)
  const snapshotManifest = await readSnapshotManifest(hostSnapshot)
  if (snapshotManifest.fingerprint !== chosen.fingerprint) {
    throw new KitError(
      'usage',
      `the backup's host snapshot is of host ${snapshotManifest.fingerprint.slice(0, 12)}, its manifest names ${chosen.fingerprint.slice(0, 12)}`,
    )
  }
  const hostDir: FreshDirectory | null = input.hostDataDir === undefined ? null : await freshDirectory(input.hostDataDir, 'host data dir')
  const storeBackup = await openStoreBackup(settings)
  try {
    await storeBackup.checkRestorable(manifest.store)

    stage('artifacts')
    const artifactFiles = manifest.files.filter((file) => file.path.startsWith(`${ARTIFACTS_DIR}/`))
    const artifacts = await FileArtifactStore.open(settings.data_dir)
    for (const file of artifactFiles) {
      const key = file.path.slice(ARTIFACTS_DIR.length + 1)
      const parsed = parseArtifactKey(key)
      if (!parsed) continue
      // put() files the bytes under the key they hash to, atomically; identical ones already there stay.
      await artifacts.put(parsed.kind, await readFile(path.join(dir, file.path)))
    }

    if (hostDir) {
      stage('host')
      await createPrivateDirectory(hostDir)
      try {
        await extractSnapshot(hostSnapshot, hostDir.path, snapshotManifest)
      } catch (error) {
        await discardDirectory(hostDir)
        throw error
      }
    }

    stage('store')
    try {
      await storeBackup.restore(path.join(dir, STORE_DIR), manifest.store, async (restored) => {
        await restored.kit.setGate(
          manifest.scope,
          'restore_pending',
          `restored from the backup of ${manifest.createdAt}; a reconcile pass verifies the host against the store`,
        )
        await restored.kit.endFence(manifest.fenceId, RESTORED_FENCE_END_REASON)
      })
    } catch (error) {
      if (hostDir) await discardDirectory(hostDir)
      throw error
    }
    options.log.info(
      {dir, scope: manifest.scope, store: storeBackup.location, hostDataDir: hostDir?.path ?? null},
      'backup restored; the restore gate is closed until verified',
    )

    stage('verify')
    const verification = hostDir ? waitingForHost(manifest.scope, hostDir.path) : await verifyRestored(settings, options.hosts, options.log)
    return {
      dir,
      backupCreatedAt: manifest.createdAt,
      fenceId: manifest.fenceId,
      scope: manifest.scope,
      hostFingerprint: chosen.fingerprint,
      store: {
        backend: manifest.store.backend,
        location: storeBackup.location,
        tables: manifest.store.tables.length,
        rows: manifest.store.tables.reduce((sum, table) => sum + table.rows, 0),
      },
      artifacts: artifactFiles.length,
      hostDataDir: hostDir?.path ?? null,
      verification,
    }
  } finally {
    await storeBackup.close()
  }
}

async function verifyRestored(settings: Settings, hosts: HostConnector, log: EngineLogger): Promise<RestoreVerification> {
  const store = await openStore(settings)
  try {
    return await verifyRestore(await createEngine(store, settings, hosts, log))
  } finally {
    await store.close()
  }
}

/** A host restored into a new data dir is not running yet; verifying against whatever answers would be wrong. */
function waitingForHost(scope: string, hostDataDir: string): RestoreVerification {
  return {
    scope,
    state: 'pending',
    code: HOST_NOT_STARTED,
    message: `start the edge host on the restored data dir (edgeworkers host serve --data-dir ${hostDataDir}), then run \`edgeworkers reconcile\` to verify the restore`,
    redeployed: [],
    retired: [],
    differences: [],
  }
}

/** The snapshot to extract: the backup's first host's, or the named host's of a kit of several (a usage error when the backup lacks it). */
function chosenSnapshot(manifest: BackupManifest, host: string | undefined): {fingerprint: string; snapshot: string} {
  if (host === undefined) return manifest.host
  const wanted = host.startsWith('onprem:') ? host : `onprem:${host}`
  const found = manifest.hosts?.find((entry) => entry.host === wanted)
  if (found) return found
  const missing = manifest.hostsMissing?.find((entry) => entry.host === wanted)
  if (missing) throw new KitError('usage', `host ${wanted} did not answer when the backup was taken; the backup holds no snapshot of it`)
  const held = manifest.hosts?.map((entry) => entry.host).join(', ') ?? 'only the one host of a single-host kit'
  throw new KitError('usage', `the backup holds no snapshot of host ${wanted} (it holds: ${held})`)
}
