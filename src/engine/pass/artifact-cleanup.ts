// The artifact cleanup lane: intents a submission recorded before writing its
// artifacts, that its version commit did not adopt. Each claimed intent is validated, kept when any
// version still references its artifact, else its artifact is deleted (idempotently). Every settle is
// fenced by the lease token. Then the asset objects no retained version serves (./asset-sweep.ts).
import {z} from 'zod'
import {ARTIFACT_KINDS, parseArtifactKey, type ArtifactKind, type ArtifactStore} from '../../artifacts/store.js'
import type {OutboxRow} from '../../store/index.js'
import {DONE, type RowResult} from '../row-result.js'
import {tally, type Lane, type LaneRun} from './lane.js'
import {requeueRow, settleRow} from './row-writes.js'
import {messageOf} from '../../errors.js'
import {sweepAssetObjects} from './asset-sweep.js'

export const CLEANUP_PAYLOAD_INVALID = 'cleanup_payload_invalid'
export const ARTIFACT_REFERENCED = 'artifact_referenced'
export const ARTIFACT_DELETE_FAILED = 'artifact_delete_failed'
export const ARTIFACT_STORE_UNAVAILABLE = 'artifact_store_unavailable'

/** The intent payload exactly as submitVersion (../deploy/submit.ts) writes it. */
const cleanupPayload = z
  .strictObject({
    kind: z.enum(ARTIFACT_KINDS),
    object_key: z.string(),
    digest: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex'),
  })
  .refine(
    (payload) => {
      const named = parseArtifactKey(payload.object_key)
      return named?.kind === payload.kind && named.sha256 === payload.digest
    },
    {message: 'is not the key of this kind and digest', path: ['object_key']},
  )

type CleanupTarget = {kind: ArtifactKind; key: string; digest: string}

/** The artifact an intent asks to remove, or why the intent is invalid. */
export function cleanupTarget(row: OutboxRow): CleanupTarget | {problem: string} {
  const payload = cleanupPayload.safeParse(row.payload)
  if (payload.success) return {kind: payload.data.kind, key: payload.data.object_key, digest: payload.data.digest}
  const issue = payload.error.issues[0]!
  return {problem: `the cleanup payload is invalid: ${issue.path.join('.') || '(payload)'}: ${issue.message}`}
}

export const artifactCleanupLane: Lane = async (run) => {
  if (run.gate.closed) return run.skip(run.gate.message)
  const artifacts = await cleanIntents(run)
  if (run.shouldStop()) return
  const deleted = await sweepAssetObjects(run, artifacts ?? (await run.openArtifactStore()))
  if (deleted > 0) run.note(`${deleted} unreferenced asset object${deleted === 1 ? '' : 's'} deleted`)
}

/** Works the due intents; returns the artifact store if it opened one. */
async function cleanIntents(run: LaneRun): Promise<ArtifactStore | undefined> {
  const {store, owner, settings} = run.engine
  let artifacts: ArtifactStore | undefined
  while (!run.shouldStop()) {
    const claimed = await store.outbox.claim({
      operation: 'artifact_cleanup',
      scope: run.scope,
      owner,
      limit: settings.artifact_cleanup.batch_size,
      leaseSeconds: settings.artifact_cleanup.lease_seconds,
    })
    if (claimed.length === 0) return artifacts
    run.counts.claimed += claimed.length
    const fresh = claimed.filter((row) => run.firstVisit(row.id))
    const handBack = claimed.filter((row) => !fresh.includes(row))
    let next = 0
    try {
      if (!artifacts) {
        try {
          artifacts = await run.openArtifactStore()
        } catch (error) {
          // A store that fails mid-batch costs every unsettled row of the batch one attempt, so a broken store
          // cannot retry a batch forever.
          for (; next < fresh.length; next++) tally(run, await burnAttempt(run, fresh[next]!, error))
          throw error
        }
      }
      for (; next < fresh.length && !run.shouldStop(); next++) tally(run, await cleanOne(run, artifacts, fresh[next]!))
    } finally {
      for (const row of [...fresh.slice(next), ...handBack]) {
        // Best effort: a lease not given back expires after artifact_cleanup.lease_seconds.
        await store.sweeps.releaseLease(row.id, row.lease_token!).catch(() => false)
        run.counts.skipped++
      }
    }
    if (handBack.length > 0) return artifacts
  }
  return artifacts
}

async function cleanOne(run: LaneRun, artifacts: ArtifactStore, row: OutboxRow): Promise<RowResult> {
  const {log} = run.engine
  const target = cleanupTarget(row)
  if ('problem' in target) {
    const result = await settleRow(run, row, {outcome: 'terminal', code: CLEANUP_PAYLOAD_INVALID, message: target.problem})
    if (result.outcome === 'terminal') log.warn({outboxId: row.id, code: CLEANUP_PAYLOAD_INVALID}, `Edge Worker artifact cleanup failed: ${target.problem}`)
    return result
  }
  // Checked per row, right before deleting, to keep the window for a version committing meanwhile small.
  const owners = await referencingVersions(run, target)
  if (owners) {
    // In use: keep it, and point at the owner. Several owners (however they came about) keep it too.
    return settleRow(run, row, {outcome: 'done', code: ARTIFACT_REFERENCED, message: `artifact ${target.key} is referenced by version ${owners.join(', ')}`})
  }
  try {
    // Deleting a missing artifact succeeds. One artifact per intent: a failed delete retries the intent whole.
    await artifacts.delete(target.key)
  } catch (error) {
    return retryCleanup(run, row, {code: ARTIFACT_DELETE_FAILED, message: `deleting ${target.key} failed: ${messageOf(error)}`})
  }
  const result = await settleRow(run, row, DONE, true)
  if (result.outcome === 'done') log.debug({outboxId: row.id, key: target.key}, 'Edge Worker artifact cleanup deleted an orphaned artifact')
  return result
}

/** The versions that reference the artifact: as project or bundle archive, or as a served asset. */
async function referencingVersions(run: LaneRun, target: CleanupTarget): Promise<string[] | undefined> {
  const {sweeps} = run.engine.store
  if (target.kind === 'asset') return (await sweeps.assetReferences([target.digest])).get(target.digest)
  return (await sweeps.artifactReferences([target.key])).get(target.key)
}

async function burnAttempt(run: LaneRun, row: OutboxRow, error: unknown): Promise<RowResult> {
  return retryCleanup(run, row, {code: ARTIFACT_STORE_UNAVAILABLE, message: `the artifact store could not be opened: ${messageOf(error)}`})
}

/** The artifact store was asked (to open, or to delete): a failed attempt, on the ladder of attempts. */
async function retryCleanup(run: LaneRun, row: OutboxRow, failure: {code: string; message: string}): Promise<RowResult> {
  const result = await requeueRow(run, row, failure)
  if (result.outcome !== 'skipped') {
    const exhausted = result.outcome === 'terminal'
    run.engine.log.warn(
      {outboxId: row.id, code: failure.code, exhausted},
      `Edge Worker artifact cleanup ${exhausted ? 'failed' : 'will retry'}: ${failure.message}`,
    )
  }
  return result
}
