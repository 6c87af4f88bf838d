// The tail Worker every shard runs: workerd hands it each invocation's trace, and it counts them
// and posts counters and the traces someone reads to the host's tail listener
// (../edge-host/tail-hub.ts).
import {capnpString} from './capnp.js'

/** The tail Worker's service, and the external service it posts to. */
export const TAIL_SERVICE = 'edgeworkers-tail'
export const TAIL_SINK_SERVICE = 'edgeworkers-tail-sink'
/** Full events a tail Worker holds while the host does not take them; past it the newest are dropped. */
const TAIL_BUFFER_LIMIT = 10_000
/** Traces of untailed scripts kept until the next post, in case the host answers that one is now tailed. */
const TAIL_HELD_LIMIT = 256
/** How often the tail Worker posts its counters while no tail wants full events. */
const TAIL_SUMMARY_INTERVAL_MS = 250
/** A post loop that made no progress this long is taken for dead (its invocation was cancelled). */
const TAIL_STALL_MS = 10_000

// After each invocation workerd hands the trace to the tail Worker. It counts every trace (outcome,
// status, exceptions, the last error: the per-Worker metrics, exact) and posts the counters every
// TAIL_SUMMARY_INTERVAL_MS; full traces go to the host only for the scripts the host's last answer
// named (a live tail or the Worker log file wants them), and at once. For a live tail, at most the
// answer's maxEventsPerSecond traces of a script per one-second window: the rest are counted
// (`sampled`), not serialized or posted, which is what a tail on a busy Worker costs the data plane.
// With the log file on (forward "*") every trace is posted. One post in flight at a time; traces
// arriving meanwhile join the next post. The end time is taken when workerd hands over the trace
// (its own wallTime and cpuTime are always 0 — workerd hides timings).
export const TAIL_WORKER_SOURCE = `let counters = new Map();
let pending = [];
let held = [];
let forward = {all: false, scripts: new Set(), perSecond: 0};
let windows = new Map();
let posting = false;
let progressAt = 0;
let wake = null;
function counterOf(script) {
  let counter = counters.get(script);
  if (!counter) counters.set(script, (counter = {outcomes: {}, statuses: {}, exceptions: 0, lastError: null, sampled: 0}));
  return counter;
}
function tally(script, trace) {
  const counter = counterOf(script);
  const outcome = String(trace.outcome);
  counter.outcomes[outcome] = (counter.outcomes[outcome] ?? 0) + 1;
  const status = String(trace.event?.response?.status ?? "none");
  counter.statuses[status] = (counter.statuses[status] ?? 0) + 1;
  const exceptions = trace.exceptions ?? [];
  counter.exceptions += exceptions.length;
  if (exceptions.length > 0) counter.lastError = String(exceptions[0].name) + ": " + String(exceptions[0].message);
  else if (outcome !== "ok" && counter.lastError === null) counter.lastError = outcome;
}
// Whether this trace of a forwarded script goes to the host; if not, it is counted as sampled out.
function admit(script, at) {
  if (forward.all) return true;
  let window = windows.get(script);
  if (!window || at - window.start >= 1000) windows.set(script, (window = {start: at, admitted: 0}));
  if (window.admitted < forward.perSecond) {
    window.admitted++;
    return true;
  }
  counterOf(script).sampled++;
  return false;
}
async function post(sink) {
  posting = true;
  try {
    while (pending.length > 0 || counters.size > 0) {
      progressAt = Date.now();
      if (pending.length === 0) await new Promise((resolve) => { wake = resolve; setTimeout(resolve, ${TAIL_SUMMARY_INTERVAL_MS}); });
      wake = null;
      const body = JSON.stringify({summaries: Object.fromEntries(counters), events: pending});
      counters = new Map();
      pending = [];
      const lastHeld = held;
      held = [];
      const response = await sink.fetch("http://tail/events", {method: "POST", headers: {"content-type": "application/json"}, body}).catch(() => null);
      const answer = response?.ok ? await response.json().catch(() => null) : (await response?.body?.cancel(), null);
      if (!answer) continue;
      forward = {all: answer.forward === "*", scripts: new Set(Array.isArray(answer.forward) ? answer.forward : []), perSecond: answer.maxEventsPerSecond ?? 0};
      for (const [script] of windows) if (!forwarded(script)) windows.delete(script);
      for (const item of lastHeld) {
        if (forwarded(item.script) && admit(item.script, item.endedAt) && pending.length < ${TAIL_BUFFER_LIMIT}) pending.push({...item, trace: slim(item.trace)});
      }
    }
  } finally {
    posting = false;
  }
}
function forwarded(script) {
  return forward.all || forward.scripts.has(script);
}
// What an event is made of (../edge-host/tail-hub.ts), without the request headers and cf object: less to
// serialize here and to parse on the host.
function slim(trace) {
  const request = trace.event?.request;
  return {
    outcome: trace.outcome,
    eventTimestamp: trace.eventTimestamp,
    truncated: trace.truncated,
    event: {request: {url: request?.url, method: request?.method}, response: trace.event?.response, cron: trace.event?.cron, queue: trace.event?.queue, batchSize: trace.event?.batchSize},
    logs: trace.logs,
    exceptions: trace.exceptions,
  };
}
export default {
  tail(events, env, ctx) {
    const endedAt = Date.now();
    const script = ctx.props.script;
    for (const trace of events) {
      tally(script, trace);
      if (forwarded(script)) {
        if (admit(script, endedAt) && pending.length < ${TAIL_BUFFER_LIMIT}) pending.push({script, endedAt, trace: slim(trace)});
      } else if (held.length < ${TAIL_HELD_LIMIT}) held.push({script, endedAt, trace});
    }
    if (pending.length > 0) wake?.();
    if (!posting || Date.now() - progressAt > ${TAIL_STALL_MS}) ctx.waitUntil(post(env.SINK));
  },
};`

export function renderTailServices(sinkAddress: string): string[] {
  return [
    `(name = "${TAIL_SERVICE}", worker = (
      modules = [(name = "tail.js", esModule = ${capnpString(TAIL_WORKER_SOURCE)})],
      compatibilityDate = "2025-01-01",
      bindings = [(name = "SINK", service = "${TAIL_SINK_SERVICE}")]))`,
    `(name = "${TAIL_SINK_SERVICE}", external = (address = ${capnpString(sinkAddress)}, http = ()))`,
  ]
}
