// Verifying a restore: while the scope's `restore_pending` gate is closed, compare what the host
// serves with what the store says it deployed, redeploy what the host lacks, retire what the store no
// longer owns (the host-reconcile rules), and open the gate once the two agree. `backup restore`
// runs it right after restoring; a reconcile pass runs it while the gate stays closed (the host was
// down, a redeploy is still retrying). Safe to run any number of times, by several runners at once.
import {randomUUID} from 'node:crypto'
import {KitError} from '../../errors.js'
import {EDGE_HOST_FENCED} from '../../protocol/management-api.js'
import type {EdgeProvider} from '../../provider/types.js'
import type {VersionRow, WorkerRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {runDeployTask, type DeployTaskResult} from '../deploy/task.js'
import {executionGate} from '../gates.js'
import {listHostScripts, type ListedScript} from '../retire/host-listing.js'
import {runHostReconcile} from '../retire/host-reconcile.js'

/** Dedupe keys of the deploy rows a verification enqueues (never the `deploy:` keys enqueueDeploy owns). */
export const RESTORE_REDEPLOY_KEY_PREFIX = 'restore-redeploy:'

export type RestoreVerificationState = 'verified' | 'pending' | 'not_pending'

export interface RestoreDifference {
  scriptName: string
  /** The release the store deployed; null for a script the store does not own. */
  expected: string | null
  /** What the host holds: its release generation, `retired`, or null when it has no such script. */
  found: string | null
}

export interface RestoreVerification {
  scope: string | null
  state: RestoreVerificationState
  /** Why it is still pending (e.g. edge_host_unreachable, restore_host_differs); null otherwise. */
  code: string | null
  message: string | null
  redeployed: Array<{scriptName: string; versionId: string; releaseGeneration: string; outcome: DeployTaskResult['outcome']}>
  retired: string[]
  /** What still differs after this run (empty once verified). */
  differences: RestoreDifference[]
}

export interface VerifyRestoreOptions {
  /** The pass asks the work to stop (its budget, a signal): no new redeploy starts. */
  shouldStop?: () => boolean
  /** Told the result of each redeploy's deploy task (the host reconcile lane counts them). */
  onRedeployed?: (result: DeployTaskResult) => void
}

interface Expected {
  worker: WorkerRow
  version: VersionRow
}

export async function verifyRestore(engine: Engine, options: VerifyRestoreOptions = {}): Promise<RestoreVerification> {
  const {store, log} = engine
  const resolution = await engine.resolveProvider()
  const empty = {redeployed: [], retired: [], differences: []}
  if (resolution.status !== 'ready') {
    return {scope: null, state: 'pending', code: resolution.code, message: `the restore cannot be verified: ${resolution.message}`, ...empty}
  }
  const {scope, provider} = resolution
  if (!(await store.kit.getGates(scope)).restore_pending) return {scope, state: 'not_pending', code: null, message: null, ...empty}
  const pending = (code: string, message: string, rest: Partial<RestoreVerification> = {}): RestoreVerification => {
    log.warn({scope, code}, `Edge Worker restore still pending: ${message}`)
    return {scope, state: 'pending', code, message, ...empty, ...rest}
  }
  const gate = await executionGate(engine, resolution)
  if (gate.closed) return pending(EDGE_HOST_FENCED, `${gate.message}; the restore is verified once the fence ends`)

  let listed: ListedScript[]
  try {
    listed = await listScripts(engine, provider)
  } catch (error) {
    return pending(hostProblemCode(error), `${(error as Error).message}; start the edge host and run \`edgeworkers reconcile\``)
  }

  const redeployed: RestoreVerification['redeployed'] = []
  for (const {worker, version} of await expectedScripts(engine, scope)) {
    const found = listed.find((script) => script.scriptName === worker.script_name)
    // A retired script cannot take a deploy: that difference is reported, not retried.
    if (found?.state === 'retired' || found?.releaseGeneration === version.release_generation) continue
    if (options.shouldStop?.()) break
    const result = await redeploy(engine, scope, worker, version)
    options.onRedeployed?.(result)
    redeployed.push({scriptName: worker.script_name, versionId: version.id, releaseGeneration: version.release_generation, outcome: result.outcome})
  }

  const reconciled = await runHostReconcile(engine, {shouldStop: options.shouldStop})
  const retired = reconciled.scripts.filter((script) => script.outcome === 'retired').map((script) => script.scriptName)

  try {
    listed = await listScripts(engine, provider)
  } catch (error) {
    return pending(hostProblemCode(error), `${(error as Error).message}; a later pass verifies the restore`, {redeployed, retired})
  }
  const differences = await differencesOf(engine, scope, listed)
  if (differences.length > 0) {
    const first = differences[0]!
    return pending(
      'restore_host_differs',
      `${differences.length} script${differences.length === 1 ? '' : 's'} still differ between the host and the store (first: ${first.scriptName} expected ${first.expected ?? 'not served'}, found ${first.found ?? 'nothing'})`,
      {redeployed, retired, differences},
    )
  }
  await store.kit.setGate(scope, 'restore_pending', null)
  log.info(
    {scope, redeployed: redeployed.length, retired: retired.length},
    'Edge Worker restore verified: the host matches the store; the restore gate is open',
  )
  return {scope, state: 'verified', code: null, message: null, redeployed, retired, differences: []}
}

function listScripts(engine: Engine, provider: EdgeProvider): Promise<ListedScript[]> {
  const {listing_max_pages: maxPages, pass_timeout_seconds: timeout} = engine.settings.host_reconcile
  return listHostScripts(provider, maxPages, AbortSignal.timeout(timeout * 1000))
}

function hostProblemCode(error: unknown): string {
  return error instanceof KitError && error.code === 'host_error' ? 'edge_host_error' : 'edge_host_unreachable'
}

/** Every Worker this scope serves with a deployed version, except those waiting to be retired. */
async function expectedScripts(engine: Engine, scope: string): Promise<Expected[]> {
  const {store} = engine
  const retiring = new Set((await store.retirements.pendingRetirements(scope)).map((worker) => worker.id))
  const expected: Expected[] = []
  for (const worker of await store.workers.list()) {
    if (
      worker.serving_scope !== scope ||
      worker.current_version_id === null ||
      worker.retired_at !== null ||
      worker.status === 'retired' ||
      retiring.has(worker.id)
    )
      continue
    const version = await store.workers.getVersion(worker.current_version_id)
    if (version?.state === 'deployed') expected.push({worker, version})
  }
  return expected
}

async function differencesOf(engine: Engine, scope: string, listed: ListedScript[]): Promise<RestoreDifference[]> {
  const byName = new Map(listed.map((script) => [script.scriptName, script]))
  const differences: RestoreDifference[] = []
  const foundOf = (script: ListedScript | undefined) => (script === undefined ? null : script.state === 'retired' ? 'retired' : script.releaseGeneration)
  for (const {worker, version} of await expectedScripts(engine, scope)) {
    const found = byName.get(worker.script_name)
    if (found?.state !== 'retired' && found?.releaseGeneration === version.release_generation) continue
    differences.push({scriptName: worker.script_name, expected: version.release_generation, found: foundOf(found)})
  }
  const serving = listed.filter((script) => script.state !== 'retired')
  const owned = await engine.store.retirements.storedScriptNames(serving.map((script) => script.scriptName))
  for (const script of serving) {
    if (!owned.has(script.scriptName)) differences.push({scriptName: script.scriptName, expected: null, found: foundOf(script)})
  }
  for (const worker of await engine.store.retirements.pendingRetirements(scope)) {
    const found = byName.get(worker.script_name)
    if (found && found.state !== 'retired') differences.push({scriptName: worker.script_name, expected: 'retired', found: foundOf(found)})
  }
  return differences
}

/**
 * Deploys the Worker's deployed version again and waits for it. An unfinished redeploy row of that
 * version (an earlier verification's) is run rather than a second one enqueued. The row bypasses
 * enqueueDeploy on purpose: its restore-pending gate refuses every deploy while this runs.
 */
async function redeploy(engine: Engine, scope: string, worker: WorkerRow, version: VersionRow): Promise<DeployTaskResult> {
  return redeployVersion(engine, scope, worker, version, RESTORE_REDEPLOY_KEY_PREFIX)
}

/** The same, under dedupe keys starting with `keyPrefix` (a restore's, or a returning host's catch-up: ../hosts/catch-up.ts). */
export async function redeployVersion(engine: Engine, scope: string, worker: WorkerRow, version: VersionRow, keyPrefix: string): Promise<DeployTaskResult> {
  const {store} = engine
  const unfinished = [
    ...(await store.outbox.list({workerId: worker.id, operation: 'deploy', status: 'pending'})),
    ...(await store.outbox.list({workerId: worker.id, operation: 'deploy', status: 'leased'})),
  ]
  const earlier = unfinished.find((row) => row.version_id === version.id && row.dedupe_key.startsWith(keyPrefix))
  const row =
    earlier ??
    (
      await store.outbox.enqueue({
        operation: 'deploy',
        dedupe_key: `${keyPrefix}${worker.id}:${version.id}:${randomUUID()}`,
        dispatch_namespace: scope,
        company_id: worker.company_id,
        department_id: worker.department_id,
        worker_id: worker.id,
        version_id: version.id,
        script_name: worker.script_name,
        payload: {releaseGeneration: version.release_generation, baseRevision: worker.base_revision},
        reserved_by: engine.owner,
      })
    ).row
  engine.log.info(
    {scope, scriptName: worker.script_name, versionId: version.id, outboxId: row.id, why: keyPrefix},
    'Edge Worker redeploy: a release the host lacks',
  )
  return runDeployTask(engine, {outboxId: row.id, companyId: worker.company_id, departmentId: worker.department_id, messageId: row.id})
}
