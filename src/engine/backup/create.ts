// `edgeworkers backup create <dir>`: inside a backup fence (joined when one is already open, e.g.
// under `fence run`), the store, the artifact store and the edge host's data snapshot, then a
// manifest with a digest for every file. Order: deploys already in flight settle first; then the
// store; then the artifacts — an artifact is always written before the version that references it
// commits, so every version in the dump finds its artifacts in the copy; then the host, whose state
// the fence keeps frozen throughout — every host of the kit (./host-snapshots.ts: a host that does
// not answer is named in the manifest and the result, not waited for).
import {existsSync} from 'node:fs'
import {chmod, copyFile, mkdir} from 'node:fs/promises'
import path from 'node:path'
import {artifactsDirOf, parseArtifactKey} from '../../artifacts/store.js'
import {Interrupted, KitError} from '../../errors.js'
import {openStoreBackup, type StoreDumpInfo} from '../../store/backup/index.js'
import type {Engine} from '../context.js'
import type {FenceView} from '../fence/fence.js'
import {withFence} from '../fence/lifecycle.js'
import type {AuditActor} from '../../store/index.js'
import {createPrivateDirectory, discardDirectory, filesUnder, freshDirectory, type FreshDirectory} from './directories.js'
import {snapshotHosts, type HostSnapshot} from './host-snapshots.js'
import {ARTIFACTS_DIR, describeFiles, HOST_SNAPSHOT_FILE, MANIFEST_FILE, STORE_DIR, writeManifest, type BackupManifest} from './manifest.js'
import {requireProvider} from '../provider.js'

export type BackupStage = 'fence' | 'store' | 'artifacts' | 'host' | 'manifest'

const DRAIN_POLL_MS = 200

export interface BackupInput {
  dir: string
  /** Of the fence this backup begins (not of one it joins). Default fence.default_ttl_seconds. */
  ttlSeconds?: number
  reason?: string
  /** Who begins the fence (its audit row), when this backup begins one. */
  actor?: AuditActor
  /**
   * The command's interruption: the backup stops at the next step (a download in flight at once),
   * lifts the fence it began, removes its partial directory and throws Interrupted saying so.
   */
  signal?: AbortSignal
}

export interface BackupResult {
  dir: string
  manifest: string
  createdAt: string
  fenceId: string
  scope: string
  hostFingerprint: string
  store: StoreDumpInfo & {location: string}
  artifacts: number
  hostSnapshotBytes: number
  /** Every host snapshotted (one for a kit of one host; the first is host/snapshot.tar). */
  hosts: HostSnapshot[]
  /** Hosts of the kit that did not answer: not in this backup. */
  hostsMissing: Array<{host: string; error: string}>
  files: number
  bytes: number
}

export async function createBackup(engine: Engine, input: BackupInput, options: {onStage?: (stage: BackupStage) => void} = {}): Promise<BackupResult> {
  const stage = options.onStage ?? (() => {})
  const target = await freshDirectory(input.dir, 'backup directory')
  const {scope} = await requireProvider(engine, 'take a backup')
  const pairing = await engine.store.kit.getPairing(scope)
  if (!pairing) throw new KitError('unpaired', `cannot take a backup: scope ${scope} has no pairing`)
  const signal = input.signal
  signal?.throwIfAborted()
  const storeBackup = await openStoreBackup(engine.settings)
  stage('fence')
  let held: {fence: FenceView; joined: boolean} | null = null
  const step = (name: BackupStage) => {
    signal?.throwIfAborted()
    stage(name)
  }
  try {
    return await withFence(
      engine,
      {ttlSeconds: input.ttlSeconds, reason: (input.reason ?? `backup to ${target.path}`).slice(0, 200), actor: input.actor},
      async (fence, joined) => {
        held = {fence, joined}
        signal?.throwIfAborted()
        await createPrivateDirectory(target)
        const dir = target.path
        await drainInflightDeploys(engine, scope, signal)

        step('store')
        await mkdir(path.join(dir, STORE_DIR), {mode: 0o700})
        const dump = await storeBackup.dump(path.join(dir, STORE_DIR))

        step('artifacts')
        const artifactRoot = artifactsDirOf(engine.settings.data_dir)
        const artifacts = await copyArtifacts(artifactRoot, path.join(dir, ARTIFACTS_DIR))
        const copied = new Set(artifacts)
        const lost = dump.artifactKeys.find((key) => !copied.has(key))
        if (lost)
          throw new KitError('failed', `artifact ${lost}, which a stored version references, is missing from ${artifactRoot}; the backup would not restore`)

        step('host')
        const snapshots = await snapshotHosts(engine, scope, dir, fence.id, signal)
        const primary = snapshots.taken[0]!
        if (snapshots.missing.length > 0)
          engine.log.warn({missing: snapshots.missing.map((host) => host.host)}, 'edge hosts that did not answer are not in this backup')

        step('manifest')
        const files = await describeFiles(dir, await filesUnder(dir))
        for (const file of files) {
          const parsed = file.path.startsWith(`${ARTIFACTS_DIR}/`) ? parseArtifactKey(file.path.slice(ARTIFACTS_DIR.length + 1)) : null
          if (parsed && parsed.sha256 !== file.sha256)
            throw new KitError(
              'failed',
              `artifact ${file.path.slice(ARTIFACTS_DIR.length + 1)} in the artifact store is corrupt (its bytes do not hash to its key)`,
            )
        }
        const manifest: BackupManifest = {
          format: 'edgeworkers-backup',
          formatVersion: 1,
          createdAt: new Date().toISOString(),
          fenceId: fence.id,
          scope,
          host: {fingerprint: primary.fingerprint, snapshot: HOST_SNAPSHOT_FILE},
          ...(snapshots.taken.length + snapshots.missing.length > 1
            ? {
                hosts: snapshots.taken.map(({host, fingerprint, snapshot}) => ({host, fingerprint, snapshot})),
                hostsMissing: snapshots.missing,
              }
            : {}),
          store: {backend: dump.backend, migrations: dump.migrations, tables: dump.tables},
          files,
        }
        await writeManifest(dir, manifest)
        engine.log.info({dir, fenceId: fence.id, files: files.length}, 'backup written')
        return {
          dir,
          manifest: path.join(dir, MANIFEST_FILE),
          createdAt: manifest.createdAt,
          fenceId: fence.id,
          scope,
          hostFingerprint: primary.fingerprint,
          store: {...manifest.store, location: storeBackup.location},
          artifacts: artifacts.length,
          hostSnapshotBytes: primary.bytes,
          hosts: snapshots.taken,
          hostsMissing: snapshots.missing,
          files: files.length,
          bytes: files.reduce((sum, file) => sum + file.size, 0),
        }
      },
    )
  } catch (error) {
    await discardDirectory(target)
    if (signal?.aborted) throw new Interrupted(await interruptedBackupLeft(engine, scope, target, held))
    throw error
  } finally {
    await storeBackup.close()
  }
}

/**
 * A deploy task that passed the execution gate just before the fence closed it may still upload and
 * settle: wait for those (their leases), so the store and the host are copied agreeing on what is
 * deployed. The fence stops new ones from starting.
 */
async function drainInflightDeploys(engine: Engine, scope: string, signal: AbortSignal | undefined): Promise<void> {
  const waitSeconds = engine.settings.deploy.lease_seconds
  const deadline = Date.now() + waitSeconds * 1000
  for (;;) {
    const now = engine.store.clock.now()
    const inflight = (await engine.store.outbox.list({operation: 'deploy', status: 'leased', scope})).filter((row) => (row.lease_expires_at ?? 0) > now)
    if (inflight.length === 0) return
    if (Date.now() >= deadline) {
      throw new KitError(
        'pending',
        `a deploy is still in flight after ${waitSeconds}s inside the fence (outbox row ${inflight[0]!.id}); a backup now would not be consistent — try again`,
      )
    }
    await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS))
    signal?.throwIfAborted()
  }
}

/** What an interrupted backup left, once it cleaned up: its fence (lifted unless the lift failed, or joined) and its directory (gone). */
async function interruptedBackupLeft(engine: Engine, scope: string, target: FreshDirectory, held: {fence: FenceView; joined: boolean} | null): Promise<string> {
  const directory = `${target.existed ? 'the partial backup was emptied out of' : 'the partial backup'} ${target.path}${target.existed ? '' : ' was removed'}`
  if (!held) return 'no backup fence was begun and nothing was written'
  const {fence, joined} = held
  if (joined) return `${directory}; the fence ${fence.id} it joined stays up for whoever began it`
  const open = await engine.store.kit.openFence(scope)
  if (open?.id === fence.id)
    return `${directory}, but the backup fence ${fence.id} could not be lifted: the host lifts it at ${fence.expiresAt} (\`edgeworkers fence end\` lifts it now)`
  return `the backup fence ${fence.id} was lifted and ${directory}; nothing was kept, run the backup again`
}

/** Copies every artifact (files named by their key; writes in flight are skipped) and returns their keys. */
async function copyArtifacts(root: string, target: string): Promise<string[]> {
  if (!existsSync(root)) return []
  const keys = (await filesUnder(root)).filter((file) => parseArtifactKey(file) !== null)
  for (const key of keys) {
    await mkdir(path.dirname(path.join(target, key)), {recursive: true, mode: 0o700})
    await copyFile(path.join(root, key), path.join(target, key))
    await chmod(path.join(target, key), 0o600)
  }
  return keys
}
