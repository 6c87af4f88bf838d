// What an interrupted `deploy` leaves, in the words of its one line. Its row is never cancelled:
// as the reference has it, an interrupted deploy stays queued and a reconcile pass completes it —
// once this process's lease has run out if it had started the task (recovery), else at once.
import type {Engine} from '../context.js'

export async function interruptedDeployLeft(engine: Engine, outboxId: string | null): Promise<string> {
  if (outboxId === null) return 'no deploy was queued; run the deploy again (a version it built is reused)'
  const row = await engine.store.outbox.get(outboxId)
  const cancel = `\`edgeworkers outbox cancel ${outboxId}\` cancels it`
  if (!row) return `outbox row ${outboxId} is gone`
  switch (row.status) {
    case 'leased':
      return `outbox row ${outboxId} stays queued: its lease runs out at ${new Date(row.lease_expires_at ?? engine.store.clock.now()).toISOString()}, then the next reconcile pass completes the deploy (${cancel})`
    case 'pending':
      return `outbox row ${outboxId} stays queued: the next reconcile pass completes the deploy (${cancel})`
    case 'deferred':
      return `outbox row ${outboxId} stays queued (deferred): it runs at the first pass after the backup fence ends (${cancel})`
    default:
      return `outbox row ${outboxId} had already ended ${row.status}`
  }
}
