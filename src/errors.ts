// One error type crosses every layer. `code` is stable and machine-readable; the message is the
// one line an operator reads. Which exit code a code maps to lives in ./cli/exit-codes.ts.
export type KitErrorCode =
  | 'usage'
  | 'config_invalid'
  | 'store_unavailable'
  | 'schema_mismatch'
  | 'not_found'
  | 'conflict'
  | 'gate_closed'
  | 'pending'
  | 'failed'
  | 'uncertain'
  | 'host_unreachable'
  | 'host_error'
  | 'unpaired'
  | 'internal'

export class KitError extends Error {
  constructor(
    readonly code: KitErrorCode,
    message: string,
    /** A narrower reference code (e.g. `edge_workers_maintenance`) when one applies. */
    readonly reason?: string,
  ) {
    super(message)
    this.name = 'KitError'
  }
}

/** The message of anything thrown (a non-Error is stringified). */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * Work that stopped because its command was interrupted (Ctrl-C, SIGTERM): the abort reason of the
 * command's signal, or thrown by work that cleaned up as it stopped, `left` saying what it left.
 */
export class Interrupted extends Error {
  constructor(readonly left?: string) {
    super(left ?? 'interrupted')
    this.name = 'Interrupted'
  }
}
