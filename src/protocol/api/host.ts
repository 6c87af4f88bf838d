// Fences, the inventory and data snapshots: what backups and `status` read from the host as a whole.
import {z} from 'zod'
import {fenceIdSchema, hex64, isoTime} from './common.js'
import {scriptStates} from './scripts.js'

// ── Fences ──────────────────────────────────────────────────────────────────────────────────────

export const beginFenceSchema = z.strictObject({
  /** Chosen by the kit (it records the fence first); beginning the same active id again is a no-op. */
  fenceId: fenceIdSchema,
  /** The host lifts the fence by itself after this long; capped by the host's fence.max_ttl_seconds. */
  ttlSeconds: z.number().int().min(1),
  reason: z.string().max(500).default(''),
})
export type BeginFence = z.input<typeof beginFenceSchema>
export type ValidBeginFence = z.output<typeof beginFenceSchema>

export const fenceSchema = z.strictObject({
  fenceId: z.string(),
  reason: z.string(),
  state: z.enum(['active', 'lifted']),
  startedAt: isoTime,
  expiresAt: isoTime,
  liftedAt: isoTime.nullable(),
  /** `ended` by a call, or `expired` at its TTL (then liftedAt = expiresAt). */
  liftReason: z.enum(['ended', 'expired']).nullable(),
})
export type Fence = z.infer<typeof fenceSchema>

/** A fence as the kit and the host hold it (the wire's ISO times as ms since the epoch). */
export interface HostFence {
  fenceId: string
  reason: string
  startedAt: number
  expiresAt: number
  /** null while active; how and when it was lifted otherwise. */
  liftedAt: number | null
  liftReason: 'ended' | 'expired' | null
}

export const fenceStatusSchema = z.strictObject({
  active: fenceSchema.nullable(),
  /** The most recently lifted fences, newest first (at most 100). */
  recent: z.array(fenceSchema),
})
export type FenceStatus = z.infer<typeof fenceStatusSchema>

// ── Inventory ───────────────────────────────────────────────────────────────────────────────────

export const shardStates = ['stopped', 'starting', 'up', 'swapping', 'down'] as const

/** What the kit said of this host since it started (docs/many-hosts.md): whether it may take traffic. */
export const kitReadinessSchema = z.strictObject({
  /** host.await_kit_confirmation is on and the kit has not yet confirmed this host current since it started. */
  awaitingKit: z.boolean(),
  /** The kit drained the host: it answers not ready while it keeps serving what reaches it. */
  drained: z.boolean(),
})
export type KitReadiness = z.infer<typeof kitReadinessSchema>

/** `/readyz`: ready when every shard serves and the kit neither drained the host nor is still to confirm it. */
export const readinessSchema = z.strictObject({
  ready: z.boolean(),
  shards: z.array(z.strictObject({index: z.number().int(), state: z.enum(shardStates)})),
  kit: kitReadinessSchema,
})

/** `PUT /v1/readiness`: the kit confirms the host current (serving) or drains it (not serving). */
export const setKitReadinessSchema = z.strictObject({serving: z.boolean()})

/** The endpoint's method, path and bodies (../endpoints.ts lists it as `kitReadiness`, with its summary). */
export const kitReadinessCall = {method: 'PUT', path: '/v1/readiness', request: setKitReadinessSchema, response: kitReadinessSchema, answer: 'json'} as const
export type Readiness = z.infer<typeof readinessSchema>

export const inventorySchema = z.strictObject({
  generatedAt: isoTime,
  scope: z.string(),
  fence: fenceSchema.nullable(),
  counts: z.strictObject({active: z.number().int(), locked_down: z.number().int(), retired: z.number().int()}),
  shards: z.array(
    z.strictObject({
      index: z.number().int(),
      state: z.enum(shardStates),
      scripts: z.number().int(),
      restarts: z.number().int(),
    }),
  ),
  scripts: z.array(
    z.strictObject({
      name: z.string(),
      state: z.enum(scriptStates),
      releaseGeneration: z.string().nullable(),
      liveReleaseGeneration: z.string().nullable(),
      shard: z.number().int().nullable(),
      policyRevision: z.number().int(),
      /** Moved to another host of the kit (docs/many-hosts.md): not run here. */
      handedOver: z.boolean(),
    }),
  ),
  /** Scripts whose current release is quarantined after runaway incidents (503 until the next deploy). */
  quarantined: z.array(
    z.strictObject({script: z.string(), releaseGeneration: z.string(), incidents: z.number().int(), lastIncident: z.string(), quarantinedAt: isoTime}),
  ),
})
export type Inventory = z.infer<typeof inventorySchema>

// ── Data snapshot ───────────────────────────────────────────────────────────────────────────────
//
// GET /v1/snapshot?fenceId=F answers a tar stream (ustar, not compressed) of the host's data dir as of
// the call, taken while fence F keeps the host state frozen: `snapshot.json` first (the schema below),
// then `host.sqlite` (the state: scripts with their module bytes, policies, secrets, pairing, fences),
// `identity.key`, and `do/<script>/…` (each Durable Object SQLite file). SQLite files are copied
// with SQLite's online backup API, so the data plane keeps writing Durable Objects meanwhile and
// every copy is still a consistent database. In the copy, fence F is recorded as lifted: a host
// started from the snapshot is not frozen. Extracted into an empty directory, the files are a data
// dir `edgeworkers host serve --data-dir` starts from (same identity, pairing, scripts and data).

export const SNAPSHOT_MANIFEST_FILE = 'snapshot.json'

/** A relative path inside a snapshot: plain segments, no `.`/`..`, no leading slash. */
export const snapshotPathSchema = z
  .string()
  .max(1024)
  .regex(/^(?!\.{1,2}(\/|$))[^/\0]+(\/(?!\.{1,2}(\/|$))[^/\0]+)*$/, {error: 'must be a relative path without . or .. segments'})

export const snapshotManifestSchema = z.strictObject({
  formatVersion: z.literal(1),
  fenceId: z.string(),
  scope: z.string(),
  fingerprint: hex64,
  createdAt: isoTime,
  /** Every file after snapshot.json, in archive order. */
  files: z.array(z.strictObject({path: snapshotPathSchema, size: z.number().int().min(0), sha256: hex64})),
})
export type SnapshotManifest = z.infer<typeof snapshotManifestSchema>
