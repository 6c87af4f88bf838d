// ── D1 databases ────────────────────────────────────────────────────────────────────────────────
// `edgeworkers d1 execute` and `d1 migrations apply`: SQL the operator runs against one of a
// script's D1 databases (named by its binding), in one transaction, through the host.
import {z} from 'zod'
import {identifierSchema} from './common.js'

/** A bound value: text, a number, null, or a blob as its byte values. */
const d1ValueSchema = z.union([z.string(), z.number(), z.null(), z.array(z.number().int().min(0).max(255))])

export const d1QueryRequestSchema = z.strictObject({
  /** The script's D1 binding name. */
  binding: identifierSchema,
  /** Run in order in one transaction: all of them or none. A query may hold several statements (then it takes no params). */
  queries: z
    .array(
      z.strictObject({
        sql: z
          .string()
          .min(1)
          .max(1024 * 1024),
        params: z.array(d1ValueSchema).max(100).default([]),
      }),
    )
    .min(1)
    .max(100),
})
export type D1QueryRequest = z.input<typeof d1QueryRequestSchema>

/** D1's own meta of one query (as a Worker's D1 binding returns it). */
export const d1MetaSchema = z.strictObject({
  served_by: z.string(),
  duration: z.number(),
  changes: z.number(),
  last_row_id: z.number(),
  changed_db: z.boolean(),
  size_after: z.number(),
  rows_read: z.number(),
  rows_written: z.number(),
})

/** One result per query; a query of several statements answers its last statement's rows. */
export const d1QueryResultSchema = z.strictObject({
  results: z.array(z.strictObject({columns: z.array(z.string()), rows: z.array(z.array(d1ValueSchema)), meta: d1MetaSchema})),
})
export type D1QueryResult = z.infer<typeof d1QueryResultSchema>
