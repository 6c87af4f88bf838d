// Binding calls never leave workerd: a Worker calls its binding service, which calls its Durable
// Object, all in one process, none of it I/O the operating system sees. workerd asks the operating
// system for I/O (a connection to accept, the host's health probe among them) only when no such
// in-process event is ready, so a request making binding calls one after another for longer than
// the watchdog's stall window (500 ms: a few thousand D1 queries, a few hundred on a loaded
// machine) kept its shard from answering the probe, and the host took the shard for stalled
// (replaced it, then quarantined the Worker). Each binding service (./kv-worker.ts, ./d1-worker.ts,
// ./r2-worker.ts, ./queue-worker.ts) calls yieldToIo() first on every call: one call in
// CALLS_PER_IO_TURN waits for a zero-delay timer, which workerd fires only after a turn of its I/O.
// One large body is the same within a call: an R2 object or a KV value streamed from the Worker
// (bytes it makes itself never touch a socket either) takes an I/O turn per chunk it stores or reads.

const CALLS_PER_IO_TURN = 16

/** yieldToIo() (per call) and ioTurn() (per chunk of a body), for a binding service's source. */
export const IO_TURN_SOURCE = `
function ioTurn() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
let callsSinceIoTurn = 0;
async function yieldToIo() {
  if (++callsSinceIoTurn < ${CALLS_PER_IO_TURN}) return;
  callsSinceIoTurn = 0;
  await ioTurn();
}`
