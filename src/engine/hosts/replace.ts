// `edgeworkers host replace <old> <new-url> --code C` (docs/many-hosts.md): the new machine joins the
// kit, every stateful Worker the old host owns moves to it (data copied inside a fence, ./move.ts),
// the kit brings the new host current, and the old one is drained and removed. Each step is skipped
// when an earlier run did it, so re-running after a crash continues where it stopped.
import {KitError} from '../../errors.js'
import type {Engine} from '../context.js'
import {pairKit} from '../pairing.js'
import {catchUpHosts, type HostCatchUp} from './catch-up.js'
import {drainHost, findHost, removeHost} from './manage.js'
import {moveWorker, type WorkerMove} from './move.js'

export interface HostReplacement {
  old: string
  new: string
  /** Whether this run paired the new host (false: an earlier run did). */
  paired: boolean
  moved: WorkerMove[]
  caughtUp: HostCatchUp | null
}

export async function replaceHost(engine: Engine, oldName: string, newUrl: string, code: string): Promise<HostReplacement> {
  const url = newUrl.trim().replace(/\/+$/, '')
  const {scope, row: old, rows} = await findHost(engine, oldName)
  if (old.host_url === url) throw new KitError('usage', `host ${old.host_scope} is at ${url} already; name the new machine's management URL`)
  let joined = rows.find((row) => row.host_url === url)
  const paired = !joined
  if (!joined) {
    const outcome = await pairKit(engine, url, code, {add: true})
    joined = (await engine.store.hosts.listMembers(scope)).find((row) => row.host_url === outcome.pairing.host_url)
    if (!joined) throw new KitError('conflict', `host ${url} did not join kit ${scope}`)
  }
  if (joined.state !== 'active') throw new KitError('conflict', `host ${joined.host_scope} is ${joined.state}; the replacement must be active`)

  const moved: WorkerMove[] = []
  for (const owner of await engine.store.owners.ownedBy(old.host_scope)) {
    if (owner.host_scope !== old.host_scope) continue // moving to the old host: \`host remove\` names it
    // A move the Worker was already making finishes where it was going.
    moved.push(await moveWorker(engine, owner.script_name, owner.moving_to ?? joined.host_scope))
  }
  const caughtUp = (await catchUpHosts(engine, scope)).find((result) => result.host === joined.host_scope) ?? null
  if (old.state !== 'draining') await drainHost(engine, old.host_scope)
  await removeHost(engine, old.host_scope)
  engine.log.info({old: old.host_scope, new: joined.host_scope, moved: moved.length}, 'Edge host replaced')
  return {old: old.host_scope, new: joined.host_scope, paired, moved, caughtUp}
}
