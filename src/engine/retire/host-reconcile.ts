// The retirement rules of the host reconcile lane (one pass):
// 1. retry pending retirements of deleted departments' Workers;
// 2. retire orphans: Workers this scope deployed whose rows a company hard delete removed (from the
//    deploy outbox rows, which survive it), then any listed script no Worker row stores;
// — only while the store and the host are paired (else `edge_host_unpaired`, nothing retired), and
// never a script whose name a Worker row stores. No new retirement starts after
// host_reconcile.new_retirement_budget_seconds; no host call after pass_timeout_seconds.
import {KitError, messageOf} from '../../errors.js'
import {scriptNameFor, type OrphanCandidate} from '../../store/index.js'
import type {Engine} from '../context.js'
import {executionGate} from '../gates.js'
import {listHostScripts} from './host-listing.js'
import {retireOrphanOnHost, retireWorkerOnHost, type HostSession, type ScriptRetirement} from './host-retirement.js'

export const EDGE_HOST_UNPAIRED = 'edge_host_unpaired'

export interface ScriptOutcome {
  kind: 'department' | 'orphan'
  scriptName: string
  /** null for a listed script nothing in the store ever named. */
  workerId: string | null
  /** `skipped`: the time budget ran out first. `protected`: a Worker row stores the name. */
  outcome: 'retired' | 'pending' | 'skipped' | 'protected'
  code?: string
}

export interface HostReconcileResult {
  /** Why nothing was attempted (unpaired, fenced). */
  skipped?: string
  scripts: ScriptOutcome[]
}

export interface HostReconcileOptions {
  /** The pass asks the lane to stop (its own budget, a signal). */
  shouldStop?: () => boolean
}

export async function runHostReconcile(engine: Engine, options: HostReconcileOptions = {}): Promise<HostReconcileResult> {
  const {store, settings, log} = engine
  const started = Date.now()
  const deadline = started + settings.host_reconcile.pass_timeout_seconds * 1000
  const newRetirementsUntil = Math.min(deadline, started + settings.host_reconcile.new_retirement_budget_seconds * 1000)
  const mayStartAnother = () => Date.now() < newRetirementsUntil && !options.shouldStop?.()

  const resolution = await engine.resolveProvider()
  if (resolution.status !== 'ready') {
    log.warn({code: resolution.code, reason: resolution.message}, `${EDGE_HOST_UNPAIRED}: ${resolution.message}; nothing retired`)
    return {skipped: `${EDGE_HOST_UNPAIRED}: ${resolution.message}`, scripts: []}
  }
  const gate = await executionGate(engine, resolution)
  if (gate.closed) return {skipped: gate.message, scripts: []}
  const session: HostSession = {provider: resolution.provider, scope: resolution.scope, deadline}
  const scripts: ScriptOutcome[] = []
  /** Records an attempt; false once the host says it is no longer paired (stop: nothing more is retired). */
  const record = (entry: Omit<ScriptOutcome, 'outcome' | 'code'>, result: ScriptRetirement): boolean => {
    scripts.push({...entry, outcome: result.outcome, ...(result.outcome === 'pending' ? {code: result.code} : {})})
    if (result.outcome === 'pending' && result.code === EDGE_HOST_UNPAIRED) {
      log.warn({code: EDGE_HOST_UNPAIRED}, `${EDGE_HOST_UNPAIRED}: the edge host no longer accepts this store; nothing more retired`)
      return false
    }
    return true
  }

  for (const worker of await store.retirements.pendingRetirements(session.scope)) {
    const entry = {kind: 'department' as const, scriptName: worker.script_name, workerId: worker.id}
    if (!mayStartAnother()) scripts.push({...entry, outcome: 'skipped'})
    else if (!record(entry, await retireWorkerOnHost(engine, session, worker))) return {scripts}
  }

  // Orphans the outbox remembers, then what the host lists that no row stores.
  const graceCutoff = store.clock.now() - settings.host_reconcile.upload_grace_seconds * 1000
  const remembered = (await store.retirements.pendingOrphans(session.scope, graceCutoff)).flatMap((orphan) => {
    const scriptName = orphanScriptName(orphan)
    return scriptName ? [{workerId: orphan.worker_id, scriptName}] : []
  })
  let listed: Array<{workerId: string | null; scriptName: string}> = []
  try {
    const hostScripts = await listHostScripts(
      session.provider,
      settings.host_reconcile.listing_max_pages,
      AbortSignal.timeout(Math.max(1, deadline - Date.now())),
    )
    const known = new Set(remembered.map((orphan) => orphan.scriptName))
    listed = hostScripts
      .filter((script) => script.state !== 'retired' && !known.has(script.scriptName))
      .map((script) => ({workerId: null, scriptName: script.scriptName}))
  } catch (error) {
    // The remembered orphans are still retired; the listed ones wait for a pass that can list.
    log.warn({err: error}, `edge_worker_onprem_orphan_scan_failed: ${error instanceof KitError ? error.message : messageOf(error)}`)
  }
  const owned = await store.retirements.storedScriptNames([...remembered, ...listed].map((orphan) => orphan.scriptName))
  // A listed script a row stores is simply owned; an outbox orphan whose name a row stores is a contradiction.
  for (const orphan of [...remembered, ...listed.filter((script) => !owned.has(script.scriptName))]) {
    const entry = {kind: 'orphan' as const, ...orphan}
    if (owned.has(orphan.scriptName)) {
      log.error({script: orphan.scriptName, workerId: orphan.workerId}, `edge_worker_onprem_orphan_owned: ${orphan.scriptName}`)
      scripts.push({...entry, outcome: 'protected'})
    } else if (!mayStartAnother()) {
      scripts.push({...entry, outcome: 'skipped'})
    } else if (!record(entry, await retireOrphanOnHost(engine, session, orphan))) {
      return {scripts}
    }
  }
  return {scripts}
}

/** The name a deploy row stored; derived from the ids only when no row recorded one. */
function orphanScriptName(orphan: OrphanCandidate): string | null {
  if (orphan.script_name) return orphan.script_name
  return orphan.company_id && orphan.department_id ? scriptNameFor(orphan.company_id, orphan.department_id) : null
}
