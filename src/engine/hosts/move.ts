// `edgeworkers worker move <worker> --to <host>` (docs/many-hosts.md): a stateful Worker changes
// owner host with its data copied inside a fence, in steps a re-run (or the next reconcile pass)
// takes up wherever a crash left them, so no data is lost and the Worker never has two owners:
//   1. record the move (owner row: moving_to);
//   2. fence: the old owner hands the Worker over — it stops running it (its data stays still) and
//      answers 503 worker_moved;
//   3. copy its data from the old owner to the new one (which then runs it);
//   4. deploy its current release there and wait until it serves;
//   5. switch the owner row, in one update: the new owner from now on;
//   6. the old owner drops its copy.
// Until 5 the old owner is the owner and holds the data; a re-run repeats 2–4 from its copy.
import {KitError} from '../../errors.js'
import {ProviderError} from '../../provider/types.js'
import {faultPoint} from '../faults.js'
import type {WorkerOwnerRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {redeployVersion} from '../backup/verify.js'
import {findWorker} from '../workers.js'
import {findHost} from './manage.js'
import {hostDown} from './fanout.js'
import {connectMembers, fanoutOver} from './members.js'
import {versionNeedsOwner} from './placement.js'

/** Dedupe keys of the deploy rows a move enqueues. */
export const WORKER_MOVE_KEY_PREFIX = 'worker-move:'

export interface WorkerMove {
  scriptName: string
  workerId: string
  from: string
  to: string
  /** Data files copied this run (0 when the copy was done by an earlier run). */
  files: number
  /** The release now served on the new owner (null when an earlier run got that far). */
  releaseGeneration: string | null
}

export async function moveWorker(engine: Engine, handle: string, toName: string): Promise<WorkerMove> {
  const {store} = engine
  const worker = await findWorker(engine, handle)
  const {scope, row: target} = await findHost(engine, toName)
  if (target.state !== 'active') throw new KitError('conflict', `host ${target.host_scope} is ${target.state}; a Worker moves only to an active host`)
  const owner = await ownerOf(engine, scope, worker.script_name, worker.current_version_id)
  const base = {scriptName: worker.script_name, workerId: worker.id, to: target.host_scope}
  // A re-run after the switch: only the old owner's copy may be left to drop.
  if (owner.host_scope === target.host_scope && owner.moving_to === null) {
    if (owner.released_from === null) throw new KitError('conflict', `Worker ${worker.script_name} is already owned by host ${target.host_scope}`)
    await releaseOldOwner(engine, scope, owner.script_name, owner.released_from)
    return {...base, from: owner.released_from, files: 0, releaseGeneration: null}
  }
  if (owner.moving_to !== null && owner.moving_to !== target.host_scope)
    throw new KitError(
      'conflict',
      `Worker ${worker.script_name} is being moved to host ${owner.moving_to}; finish that move first (worker move ${handle} --to ${owner.moving_to})`,
    )
  if (worker.current_version_id === null) throw new KitError('conflict', `Worker ${worker.script_name} has no deployed version to move`)
  const version = await store.workers.getVersion(worker.current_version_id)
  if (!version) throw new KitError('not_found', `version ${worker.current_version_id} of Worker ${worker.script_name} not found`)

  const from = owner.host_scope
  if (!(await store.owners.beginMove(worker.script_name, from, target.host_scope)))
    throw new KitError('conflict', `Worker ${worker.script_name} changed owner meanwhile; run the move again`)
  faultPoint('move.after_begin')
  const members = await connectMembers(store, engine.settings, engine.hosts, scope)
  const member = (hostScope: string) => {
    const found = members.find((candidate) => candidate.row.host_scope === hostScope)
    if (!found) throw new KitError('not_found', `host ${hostScope} is not a host of kit ${scope}`)
    return found
  }
  const [old, next] = [member(from), member(target.host_scope)]
  await onHost(from, () => old.provider.handOverScript(worker.script_name))
  faultPoint('move.after_fence')
  const data = await onHost(from, () => old.provider.readScriptData(worker.script_name))
  await onHost(target.host_scope, () => next.provider.writeScriptData(worker.script_name, data))
  faultPoint('move.after_copy')

  // The deploy task aimed at the new owner alone (the fan-out over it knows the move is under way).
  const hostEngine: Engine = {...engine, resolveProvider: async () => ({status: 'ready', provider: fanoutOver(store, engine.settings, scope, [next]), scope})}
  const deployed = await redeployVersion(hostEngine, scope, worker, version, `${WORKER_MOVE_KEY_PREFIX}${target.host_scope}:`)
  // Superseded: a newer deploy of the Worker is under way; it completes on the new owner after the switch.
  if (deployed.outcome !== 'completed' && deployed.outcome !== 'superseded')
    throw new KitError(
      'host_error',
      `the deploy on host ${target.host_scope} ended ${deployed.outcome}; the old owner keeps the Worker (fenced): run the move again`,
    )
  faultPoint('move.after_deploy')
  if (!(await store.owners.completeMove(worker.script_name, from, target.host_scope)))
    throw new KitError('conflict', `Worker ${worker.script_name} changed owner meanwhile; run the move again`)
  faultPoint('move.after_switch')
  await releaseOldOwner(engine, scope, worker.script_name, from)
  engine.log.info({scriptName: worker.script_name, from, to: target.host_scope, files: data.files.length}, 'Edge Worker moved to another host')
  return {...base, from, files: data.files.length, releaseGeneration: deployed.outcome === 'completed' ? deployed.releaseGeneration : null}
}

/** The Worker's owner row; a stateful Worker deployed while its kit had one host gets it now (that host). */
async function ownerOf(engine: Engine, scope: string, scriptName: string, versionId: string | null): Promise<WorkerOwnerRow> {
  const {store} = engine
  const row = await store.owners.get(scriptName)
  if (row) return row
  const version = versionId === null ? undefined : await store.workers.getVersion(versionId)
  if (!version || !versionNeedsOwner(version))
    throw new KitError('conflict', `Worker ${scriptName} keeps no data on a host: it runs on every active host, there is nothing to move`)
  const first = (await store.hosts.listMembers(scope)).find((member) => member.state === 'active')
  if (!first) throw new KitError('not_found', `kit ${scope} has no active host`)
  return store.owners.claim(scope, scriptName, first.host_scope)
}

/** The old owner stops running the Worker (again, after a crash) and drops its copy of the data. */
async function releaseOldOwner(engine: Engine, scope: string, scriptName: string, from: string): Promise<void> {
  const member = (await connectMembers(engine.store, engine.settings, engine.hosts, scope)).find((candidate) => candidate.row.host_scope === from)
  if (member) {
    await onHost(from, () => member.provider.handOverScript(scriptName))
    await onHost(from, () => member.provider.dropScriptData(scriptName))
  }
  await engine.store.owners.released(scriptName, from)
}

/** A host's refusal or silence as the one-line error the command exits with (the move is left to a re-run). */
async function onHost<T>(hostScope: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error
    const code = hostDown(error) ? 'host_unreachable' : 'host_error'
    throw new KitError(code, `host ${hostScope}: ${error.message}; run the move again once it answers`)
  }
}

/**
 * Finishes the moves of kit `scope` that a crashed `worker move` left under way (a fenced old owner
 * serves nothing): the host reconcile lane runs it every pass; each step is idempotent, so a move
 * still running elsewhere meets no harm (one of the two switches the owner, the other is refused).
 */
export async function finishMoves(engine: Engine, scope: string): Promise<WorkerMove[]> {
  const finished: WorkerMove[] = []
  for (const row of await engine.store.owners.list(scope)) {
    if (row.moving_to === null) continue
    try {
      finished.push(await moveWorker(engine, row.script_name, row.moving_to))
    } catch (error) {
      if (!(error instanceof KitError)) throw error
      engine.log.warn({scriptName: row.script_name, to: row.moving_to, err: error.message}, 'Edge Worker move not finished; a later pass tries again')
    }
  }
  return finished
}
