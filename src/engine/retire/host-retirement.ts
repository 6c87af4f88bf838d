// What retiring one script on the edge host takes, shared by `retire` and the host reconcile lane:
// - a department's Worker: lockdown and purges first, by the capabilities of its deployed release,
//   each confirmed by the host — and only then the host's retire. A failure before that leaves the
//   retirement pending (the department stays deleted; a later pass retries).
// - an orphan (its Worker rows are gone): no release to look at, so straight to the host's retire.
// Each attempt writes `department.worker_script_deleted` first; its (first) time tells how long a
// script has been failing, across processes.
import {setTimeout as sleep} from 'node:timers/promises'
import {ProviderError, type EdgeProvider, type ScriptDetails} from '../../provider/types.js'
import type {WorkerRow} from '../../store/index.js'
import {capabilitiesOf, isKnownBuilderPolicy} from '../capabilities.js'
import type {Engine} from '../context.js'
import {messageOf} from '../../errors.js'
import {RETIREMENT_ACTIONS, workerSystemEntry} from './audit.js'

export type RetirementStep = 'lockdown' | 'access_policy' | 'secrets_purge' | 'credentials_purge' | 'retire'

export interface HostSession {
  provider: EdgeProvider
  scope: string
  /** Wall-clock ms after which no host call may start (the pass timeout); omitted = none. */
  deadline?: number
}

export type ScriptRetirement = {outcome: 'retired'; steps: RetirementStep[]} | {outcome: 'pending'; steps: RetirementStep[]; code: string; message: string}

export const ONPREM_RETIREMENT_FAILED = 'edge_worker_onprem_retirement_failed'
/** What a confirmed retirement leaves on a Worker's stored release (no Worker → nothing to lock). */
const RETIRE_ONLY: RetirementStep[] = ['retire']

/** The host steps for a release built with `builderPolicy`; null = nothing served (no release). */
export function retirementSteps(builderPolicy: string | null): RetirementStep[] {
  if (builderPolicy === null) return RETIRE_ONLY
  const can = capabilitiesOf(builderPolicy)
  return [
    ...(can.retirementLockdown ? (['lockdown'] as const) : []),
    // Every release has an access policy: closing it shuts the public channel of pre-v2.8 releases.
    'access_policy' as const,
    ...(can.workerSecrets ? (['secrets_purge'] as const) : []),
    ...(can.serviceAccountCredentials ? (['credentials_purge'] as const) : []),
    'retire' as const,
  ]
}

/** The builder policy of the Worker's deployed release, as the store knows it. */
export async function deployedPolicy(engine: Engine, worker: WorkerRow): Promise<string | null> {
  if (!worker.current_version_id) return null
  return (await engine.store.workers.getVersion(worker.current_version_id))?.builder_policy ?? null
}

export async function retireWorkerOnHost(
  engine: Engine,
  session: HostSession,
  worker: WorkerRow,
  onStep: (step: RetirementStep) => void = () => {},
): Promise<ScriptRetirement> {
  const {store, settings} = engine
  const facts = {company_id: worker.company_id, department_id: worker.department_id, script_name: worker.script_name}
  let steps: RetirementStep[] = RETIRE_ONLY
  try {
    await store.audit.append(workerSystemEntry(RETIREMENT_ACTIONS.scriptDeleted, worker.id, facts, session.scope))
    const script = await hostCall(session, (signal) => session.provider.getScript(worker.script_name, signal))
    steps = await stepsFor(engine, worker, script)
    if (script?.state !== 'retired') {
      // Control calls share one budget; a refused or unanswered one is retried while it lasts.
      const budgetEnd = Math.min(Date.now() + settings.host_reconcile.lockdown_budget_seconds * 1000, session.deadline ?? Infinity)
      for (const step of steps) {
        if (step === 'retire') break
        onStep(step)
        await confirmed(engine, budgetEnd, (signal) => controlCall(session, worker.script_name, step, signal))
      }
    }
    onStep('retire')
    await hostCall(session, (signal) => session.provider.retireScript(worker.script_name, signal))
    await store.transaction(async (tx) => {
      await tx.retirements.markRetired(worker.id)
      await tx.audit.append(workerSystemEntry(RETIREMENT_ACTIONS.workerRetired, worker.id, {...facts, namespace: session.scope}, null))
    })
    engine.log.info({workerId: worker.id, script: worker.script_name}, `edge_worker_onprem_retired: ${worker.script_name}`)
    return {outcome: 'retired', steps}
  } catch (error) {
    const failure = failureOf(error)
    engine.log.error(
      {workerId: worker.id, script: worker.script_name, code: failure.code, err: error},
      `${ONPREM_RETIREMENT_FAILED}: ${failure.code}: ${failure.message}`,
    )
    await reportIfStuck(engine, worker.id, worker.script_name, session.scope, failure.code)
    return {outcome: 'pending', steps, ...failure}
  }
}

/**
 * Retires an orphan's script. `workerId` is the Worker its deploy rows named (null for a listed
 * script nothing in the store ever named): its rows record the attempt and confirm the retirement.
 */
export async function retireOrphanOnHost(
  engine: Engine,
  session: HostSession,
  orphan: {workerId: string | null; scriptName: string},
): Promise<ScriptRetirement> {
  const {store} = engine
  const facts = {script_name: orphan.scriptName}
  try {
    if (orphan.workerId) await store.audit.append(workerSystemEntry(RETIREMENT_ACTIONS.scriptDeleted, orphan.workerId, facts, session.scope))
    await hostCall(session, (signal) => session.provider.retireScript(orphan.scriptName, signal))
    // A Worker the deploy rows name whose row is gone was hard-deleted with its company: its data
    // (Durable Objects, KV, D1, R2, queues) goes too. A listed script no row ever named keeps it.
    if (orphan.workerId) await hostCall(session, (signal) => session.provider.purgeScriptData(orphan.scriptName, signal))
    if (orphan.workerId) await store.audit.append(workerSystemEntry(RETIREMENT_ACTIONS.scriptNeutralized, orphan.workerId, facts, session.scope))
    engine.log.info({workerId: orphan.workerId, script: orphan.scriptName}, `edge_worker_onprem_orphan_retired: ${orphan.scriptName}`)
    return {outcome: 'retired', steps: RETIRE_ONLY}
  } catch (error) {
    const failure = failureOf(error)
    engine.log.error(
      {workerId: orphan.workerId, script: orphan.scriptName, code: failure.code, err: error},
      `${ONPREM_RETIREMENT_FAILED}: ${failure.code}: ${failure.message}`,
    )
    if (orphan.workerId) await reportIfStuck(engine, orphan.workerId, orphan.scriptName, session.scope, failure.code)
    return {outcome: 'pending', steps: RETIRE_ONLY, ...failure}
  }
}

/** The deployed release's policy from the store, else the one the host holds (a deploy in flight). */
async function stepsFor(engine: Engine, worker: WorkerRow, script: ScriptDetails | null): Promise<RetirementStep[]> {
  const stored = await deployedPolicy(engine, worker)
  if (stored) return retirementSteps(stored)
  return script && isKnownBuilderPolicy(script.builderPolicy) ? retirementSteps(script.builderPolicy) : RETIRE_ONLY
}

async function controlCall(session: HostSession, scriptName: string, step: Exclude<RetirementStep, 'retire'>, signal: AbortSignal): Promise<void> {
  const {provider} = session
  switch (step) {
    case 'lockdown':
      return provider.lockdownScript(scriptName, signal)
    case 'access_policy':
      return provider.replaceAccessPolicy(scriptName, {mode: 'teamsync_internal', ipAllowlist: []}, signal)
    case 'secrets_purge':
      return provider.purgeSecrets(scriptName, signal)
    case 'credentials_purge':
      return provider.purgeCredentials(scriptName, signal)
  }
}

/** Retries a refused or unanswered (idempotent) control call every lockdown_retry_delay_ms until the budget ends. */
async function confirmed(engine: Engine, budgetEnd: number, call: (signal: AbortSignal) => Promise<void>): Promise<void> {
  const delay = engine.settings.host_reconcile.lockdown_retry_delay_ms
  for (;;) {
    try {
      return await call(AbortSignal.timeout(Math.max(1, budgetEnd - Date.now())))
    } catch (error) {
      const transient = error instanceof ProviderError && (error.kind === 'retryable' || error.kind === 'ambiguous')
      if (!transient || Date.now() + delay >= budgetEnd) throw error
      await sleep(delay)
    }
  }
}

/** One host call, cut off at the session's deadline. */
async function hostCall<T>(session: HostSession, call: (signal: AbortSignal | undefined) => Promise<T>): Promise<T> {
  if (session.deadline === undefined) return call(undefined)
  const remaining = session.deadline - Date.now()
  if (remaining <= 0) throw new ProviderError('retryable', 'host_reconcile_timeout', 'the host reconcile pass ran out of time')
  return call(AbortSignal.timeout(remaining))
}

function failureOf(error: unknown): {code: string; message: string} {
  if (error instanceof ProviderError) return {code: error.code, message: error.message}
  if ((error as Error | undefined)?.name === 'TimeoutError') return {code: 'edge_host_no_answer', message: 'the host call ran out of time'}
  return {code: 'internal', message: messageOf(error)}
}

/** WARNING once a script has been failing for the stuck threshold (since its first attempt). */
async function reportIfStuck(engine: Engine, workerId: string, scriptName: string, scope: string, code: string): Promise<void> {
  const marker = await engine.store.audit.get(workerSystemEntry(RETIREMENT_ACTIONS.scriptDeleted, workerId, {}, scope).id).catch(() => undefined)
  if (!marker) return
  const failingSeconds = Math.floor((engine.store.clock.now() - marker.created_at) / 1000)
  if (failingSeconds >= engine.settings.host_reconcile.stuck_threshold_seconds) {
    engine.log.warn({workerId, script: scriptName, code, failingSeconds}, `edge_worker_onprem_retirement_stuck: ${code} for ${failingSeconds}s (${scriptName})`)
  }
}
