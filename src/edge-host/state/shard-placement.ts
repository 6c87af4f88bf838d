// Where a script goes: the shard rule its first upload and a start-up placement share.

/** Least-loaded shard with room (lowest index on ties), or null when all are full. */
export function leastLoadedShard(loads: Map<number, number>, shardCount: number, maxPerShard: number): number | null {
  let best: number | null = null
  for (let shard = 0; shard < shardCount; shard++) {
    const load = loads.get(shard) ?? 0
    if (load < maxPerShard && (best === null || load < (loads.get(best) ?? 0))) best = shard
  }
  return best
}
