// Which Workers the front door may serve without the Node data plane: those whose every answer the
// fast path gives as the data plane would (../http/data-plane.ts). Anything the data plane decides
// per request or holds — unknown, retired, locked down, handed over or quarantined (their 404, 403
// and 503 bodies), an access policy other than public, a gradual deployment's split, static assets,
// a Worker in the loader, a shard not serving (a swap that holds requests, for Durable Objects) —
// and a Worker someone tails (the tail wants the host's view of each request) stays with it.
import type {Shard} from '../runtime/shard.js'
import type {RouteRecord} from '../state/scripts.js'

export interface FastPathSources {
  shards: readonly Shard[]
  route(script: string): RouteRecord | null
  isTailed(script: string): boolean
  hasAssets(script: string, releaseGeneration: string): boolean
}

/** Script → its Worker's own workerd socket, for each Worker the fast path may serve now. */
export function fastTargets(sources: FastPathSources): Map<string, string> {
  const targets = new Map<string, string>()
  for (const shard of sources.shards) {
    for (const [script, socket] of shard.ownSockets()) {
      const route = sources.route(script)
      if (route === null || route.shard !== shard.index || route.retired || route.lockedDown || route.quarantined || route.handedOver) continue
      if (route.split !== null || route.policy.mode !== 'public' || sources.isTailed(script)) continue
      const generation = shard.liveGeneration(script)
      if (generation === undefined || sources.hasAssets(script, generation)) continue
      targets.set(script, socket)
    }
  }
  return targets
}
