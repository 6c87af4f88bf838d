// What became of one outbox row a runner worked on: the one outcome type every lane settles,
// requeues and counts from (in the spirit of controller-runtime's Result and TerminalError). A
// task's own result is translated into it once, where the task is (../deploy/row-result.ts).
//
// - done: nothing is left to do. Settled `completed` — or `cancelled` with the code of why the work
//   became moot (a newer deploy won, the artifact is in use, the Worker retired);
// - requeue_after: handed back on the retry ladder (engine's rule, ./retry.ts), due again at the
//   row's next_attempt_at;
// - terminal: settled `failed` (it can never succeed, or its attempts ran out); an operator may retry it;
// - uncertain: settled `uncertain` (it may have reached the host); an operator decides;
// - skipped: not worked on in this run (the lease was lost, the gate closed, another runner holds
//   it): left as it is, or handed back, for a later pass.
export type RowResult =
  | {outcome: 'done'; code: string | null; message: string | null}
  | {outcome: 'requeue_after'; code: string; message: string}
  | {outcome: 'terminal'; code: string; message: string}
  | {outcome: 'uncertain'; code: string; message: string}
  | {outcome: 'skipped'; reason: string; message?: string}

/** Completed: nothing is left to do, and nothing to say why. */
export const DONE = {outcome: 'done', code: null, message: null} as const satisfies RowResult
export const LEASE_LOST = {outcome: 'skipped', reason: 'lease_lost'} as const satisfies RowResult
