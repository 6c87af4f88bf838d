// Control receipts: the result of each control mutation the kit sent with a mutation id, kept so a
// repeated id is answered from the receipt instead of applied twice, and so the kit can read what
// happened to a call whose answer it lost (then acknowledge it).
import type {ReceiptOperation} from '../../protocol/management-api.js'
import type {HostDatabase} from './database.js'
import type {FencedTx} from './fences.js'

export interface ReceiptRecord {
  mutationId: string
  commandDigest: string
  operation: ReceiptOperation
  scriptName: string
  result: Record<string, unknown>
  createdAt: number
  acknowledgedAt: number | null
}

interface ReceiptRow {
  mutation_id: string
  command_digest: string
  operation: ReceiptOperation
  script: string
  result: string
  created_at: number
  acknowledged_at: number | null
}

export class Receipts {
  constructor(private readonly db: HostDatabase) {}

  get(mutationId: string): ReceiptRecord | null {
    const row = this.db.one<ReceiptRow>('SELECT * FROM receipts WHERE mutation_id = ?', mutationId)
    if (!row) return null
    return {
      mutationId: row.mutation_id,
      commandDigest: row.command_digest,
      operation: row.operation,
      scriptName: row.script,
      result: JSON.parse(row.result),
      createdAt: row.created_at,
      acknowledgedAt: row.acknowledged_at,
    }
  }

  record(tx: FencedTx, receipt: {mutationId: string; commandDigest: string; operation: ReceiptOperation; scriptName: string; result: object}): void {
    tx.run(
      'INSERT INTO receipts (mutation_id, command_digest, operation, script, result, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      receipt.mutationId,
      receipt.commandDigest,
      receipt.operation,
      receipt.scriptName,
      JSON.stringify(receipt.result),
      tx.now,
    )
  }

  /** False when the host has no receipt of that id; acknowledging twice keeps the first time. */
  acknowledge(tx: FencedTx, mutationId: string): boolean {
    return tx.run('UPDATE receipts SET acknowledged_at = COALESCE(acknowledged_at, ?) WHERE mutation_id = ?', tx.now, mutationId).changes === 1
  }
}
