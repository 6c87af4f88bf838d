// The artifact cleanup lane: intents a submission recorded before writing its
// artifacts, that its version commit did not adopt. Each claimed intent is validated, kept when any
// version still references its artifact, else its artifact is deleted (idempotently). Every settle is
// fenced by the lease token.
import {z} from 'zod'
import {ARTIFACT_KINDS, parseArtifactKey, type ArtifactStore} from '../../artifacts/store.js'
import type {OutboxRow} from '../../store/index.js'
import {retryPlan} from '../retry.js'
import type {Lane, LaneRun, RowOutcome} from './lane.js'
import {messageOf} from '../../errors.js'

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

/** The artifact key an intent asks to remove, or why the intent is invalid. */
export function cleanupTarget(row: OutboxRow): {key: string} | {problem: string} {
  const payload = cleanupPayload.safeParse(row.payload)
  if (payload.success) return {key: payload.data.object_key}
  const issue = payload.error.issues[0]!
  return {problem: `the cleanup payload is invalid: ${issue.path.join('.') || '(payload)'}: ${issue.message}`}
}

export const artifactCleanupLane: Lane = async (run) => {
  if (run.gate.closed) return run.skip(run.gate.message)
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
    if (claimed.length === 0) return
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
          for (; next < fresh.length; next++) run.counts[await burnAttempt(run, fresh[next]!, error)]++
          throw error
        }
      }
      for (; next < fresh.length && !run.shouldStop(); next++) run.counts[await cleanOne(run, artifacts, fresh[next]!)]++
    } finally {
      for (const row of [...fresh.slice(next), ...handBack]) {
        // Best effort: a lease not given back expires after artifact_cleanup.lease_seconds.
        await store.sweeps.releaseLease(row.id, row.lease_token!).catch(() => false)
        run.counts.skipped++
      }
    }
    if (handBack.length > 0) return
  }
}

async function cleanOne(run: LaneRun, artifacts: ArtifactStore, row: OutboxRow): Promise<RowOutcome> {
  const {store, log} = run.engine
  const token = row.lease_token!
  const target = cleanupTarget(row)
  if ('problem' in target) {
    if (!(await store.outbox.settle(row.id, token, {status: 'failed', errorCode: CLEANUP_PAYLOAD_INVALID, error: target.problem}))) return 'skipped'
    log.warn({outboxId: row.id, code: CLEANUP_PAYLOAD_INVALID}, `Edge Worker artifact cleanup failed: ${target.problem}`)
    return 'failed'
  }
  // Checked per row, right before deleting, to keep the window for a version committing meanwhile small.
  const owners = (await store.sweeps.artifactReferences([target.key])).get(target.key)
  if (owners) {
    // In use: keep it, and point at the owner. Several owners (however they came about) keep it too.
    const error = `artifact ${target.key} is referenced by version ${owners.join(', ')}`
    return (await store.outbox.settle(row.id, token, {status: 'cancelled', errorCode: ARTIFACT_REFERENCED, error})) ? 'completed' : 'skipped'
  }
  try {
    // Deleting a missing artifact succeeds. One artifact per intent: a failed delete retries the intent whole.
    await artifacts.delete(target.key)
  } catch (error) {
    return retryOutcome(run, row, {errorCode: ARTIFACT_DELETE_FAILED, error: `deleting ${target.key} failed: ${messageOf(error)}`})
  }
  if (!(await store.outbox.settle(row.id, token, {status: 'completed', attempted: true}))) return 'skipped'
  log.debug({outboxId: row.id, key: target.key}, 'Edge Worker artifact cleanup deleted an orphaned artifact')
  return 'completed'
}

async function burnAttempt(run: LaneRun, row: OutboxRow, error: unknown): Promise<RowOutcome> {
  return retryOutcome(run, row, {errorCode: ARTIFACT_STORE_UNAVAILABLE, error: `the artifact store could not be opened: ${messageOf(error)}`})
}

async function retryOutcome(run: LaneRun, row: OutboxRow, failure: {errorCode: string; error: string}): Promise<RowOutcome> {
  const {engine} = run
  // The artifact store was asked (to open, or to delete): a failed attempt, on the ladder of attempts.
  const plan = retryPlan(engine.settings.backoff, 'failed_attempt', {attempts: row.attempts + 1, waits: row.waits}, engine.store.clock.now())
  const retried = await engine.store.outbox.retryLater(row.id, row.lease_token!, {...failure, ...plan, attempted: true})
  if (retried.outcome === 'lease_lost') return 'skipped'
  const exhausted = retried.outcome === 'failed'
  run.engine.log.warn(
    {outboxId: row.id, code: failure.errorCode, exhausted},
    `Edge Worker artifact cleanup ${exhausted ? 'failed' : 'will retry'}: ${failure.error}`,
  )
  return exhausted ? 'failed' : 'retried'
}
