// Moving a stateful Worker between the hosts of a kit (docs/many-hosts.md): the old owner hands the
// script over (it stops running it, so its data stays still), the kit reads its data there, writes
// it on the new owner, and once the owner row switched, drops the old copy. The data is the
// Worker's Durable Object storage directory (its KV, D1, R2 and queues live there too), as files
// relative to it; it travels as JSON, within the host's asset body limit (host.max_asset_bytes).
import {z} from 'zod'
import type {Endpoint} from '../endpoint.js'
import {hex64} from './common.js'

/** A path inside the Worker's storage directory: relative segments, no `.`/`..`. */
const dataPathSchema = z
  .string()
  .max(1024)
  .regex(/^[^/]+(\/[^/]+)*$/, {error: 'must be a relative path of non-empty segments'})
  .refine((value) => !value.split('/').some((segment) => segment === '.' || segment === '..'), {error: 'must not contain "." or ".." segments'})

export const scriptDataSchema = z.strictObject({
  files: z.array(z.strictObject({path: dataPathSchema, sha256: hex64, contentBase64: z.base64({error: 'must be base64'})})).max(10_000),
})
export type ScriptData = z.infer<typeof scriptDataSchema>

export const handoverSchema = z.strictObject({name: z.string(), handedOver: z.boolean(), files: z.number().int()})
export type Handover = z.infer<typeof handoverSchema>

const signed = true

/** The handover rows of the endpoint table (../endpoints.ts). */
export const handoverEndpoints = {
  handOver: {
    method: 'POST',
    path: '/v1/scripts/:name/handover',
    signed,
    response: handoverSchema,
    answer: 'json',
    summary:
      'This host is not (or no longer) the script’s owner: it stops running it (answered once its shard no longer runs it; also for a name it does not hold yet), the data plane answers 503 worker_moved; uploads and control calls are still taken, not run. Idempotent; refused 423 during a fence.',
  },
  scriptData: {
    method: 'GET',
    path: '/v1/scripts/:name/data',
    signed,
    response: scriptDataSchema,
    answer: 'json',
    summary: 'The handed-over script’s storage files (409 script_not_handed_over while it runs here).',
  },
  importScriptData: {
    method: 'PUT',
    path: '/v1/scripts/:name/data',
    signed,
    request: scriptDataSchema,
    response: handoverSchema,
    answer: 'json',
    summary:
      'Replaces the script’s storage files with these (each checked against its SHA-256), then runs it here again. Idempotent: a script already running here on an import keeps its data; refused 409 script_not_handed_over while it runs here on data of its own.',
  },
  dropScriptData: {
    method: 'DELETE',
    path: '/v1/scripts/:name/data',
    signed,
    response: handoverSchema,
    answer: 'json',
    summary: 'Removes the handed-over script’s storage files (the new owner holds them). Idempotent.',
  },
} as const satisfies Record<string, Endpoint>
