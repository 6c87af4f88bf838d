// Per-Worker counts without a tail Worker (issue 35). A tail Worker (./tail-worker.ts) costs workerd
// about as much again as the request itself, for every request, whether anyone reads the traces or
// not (bench/host/shard-config.ts: 1.6–1.9× bare workerd's CPU per request; an empty tail handler
// 1.47×, a streaming tail 1.94×). So a Worker whose traces nobody reads — no live tail on it, no
// Worker log file, no Durable Objects (whose invocations only a trace sees) — runs behind a counting
// main module instead (1.01×): it imports the Worker's main module, hands workerd the same default
// export with its fetch, scheduled and queue handlers wrapped, and counts in the isolate's memory
// what the tail Worker counted from traces — outcomes, response statuses, uncaught exceptions (also
// of ctx.waitUntil promises) and the last error. Every other export is the main module's own.
//
// The counts leave through a named entrypoint of the same Worker (so the same isolate), which no
// route reaches: the shard's `worker-counts` socket runs a Worker bound to that entrypoint of each
// counted Worker; a request to it takes every Worker's counts (each hands them over and resets) and
// answers them keyed by workerd service name, in the tail Worker's summary shape, which the host
// reads when /metrics is scraped, `status` asks for the activity, and before it stops a process
// (../edge-host/worker-counts.ts).
import {capnpString} from './capnp.js'

/** The socket (and service) of the shard's worker-counts Worker; present only when the shard has a counted Worker. */
export const WORKER_COUNTS_SOCKET = 'worker-counts'

/** The counting main module's name (workerd runs the first module as the main one). */
export const COUNTING_MODULE = '__edgeworkers_counted__.js'

/** The named entrypoint of a counted Worker that hands over its counts. */
const COUNTS_ENTRYPOINT = '__edgeworkersCounts'

/** The counting main module of a Worker whose main module is `mainModule`. */
export function countingModuleSource(mainModule: string): string {
  const main = JSON.stringify(mainModule)
  return `import * as main from ${main};
let counts = {outcomes: {}, statuses: {}, exceptions: 0, lastError: null};
function failed(error) {
  counts.exceptions++;
  counts.lastError = String(error?.name ?? "Error") + ": " + String(error?.message ?? error);
}
function ended(outcome, status) {
  counts.outcomes[outcome] = (counts.outcomes[outcome] ?? 0) + 1;
  counts.statuses[status] = (counts.statuses[status] ?? 0) + 1;
}
// No async function and no await here: a stack taken in the Worker shows no frame of this module.
function counted(call, fetch) {
  let result;
  try {
    result = call();
  } catch (error) {
    failed(error);
    ended("exception", "none");
    throw error;
  }
  const done = (value) => (ended("ok", fetch && typeof value?.status === "number" ? String(value.status) : "none"), value);
  if (typeof result?.then !== "function") return done(result);
  return result.then(done, (error) => {
    failed(error);
    ended("exception", "none");
    throw error;
  });
}
// The context the handler gets: the same object but for waitUntil, whose rejections are counted.
function countedContext(ctx) {
  if (typeof ctx?.waitUntil !== "function") return ctx;
  return new Proxy(ctx, {
    get(target, key) {
      if (key === "waitUntil") return (promise) => target.waitUntil(Promise.resolve(promise).catch((error) => { failed(error); throw error; }));
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
const HANDLERS = ["fetch", "scheduled", "queue"];
const handler = main.default;
let counting = handler;
// A class (WorkerEntrypoint): a subclass whose handlers call the class's own. A function that is no class is left as it
// is: this module must never fail where the Worker's own would not (the validation sandbox runs the Worker without it).
function subclassOf(base) {
  try {
    return class extends base {};
  } catch {
    return base;
  }
}
if (typeof handler === "function" && (counting = subclassOf(handler)) !== handler) {
  for (const name of HANDLERS) {
    const own = handler.prototype?.[name];
    if (typeof own === "function")
      Object.defineProperty(counting.prototype, name, {configurable: true, writable: true, value(...args) { return counted(() => own.apply(this, args), name === "fetch"); }});
  }
} else if (handler !== null && typeof handler === "object") {
  counting = Object.create(handler);
  for (const name of HANDLERS) {
    const own = handler[name];
    if (typeof own === "function") counting[name] = (first, env, ctx) => counted(() => own.call(handler, first, env, countedContext(ctx)), name === "fetch");
  }
}
export default counting;
export * from ${main};
export const ${COUNTS_ENTRYPOINT} = {
  fetch() {
    const taken = counts;
    counts = {outcomes: {}, statuses: {}, exceptions: 0, lastError: null};
    return Response.json(taken);
  },
};
`
}

const COUNTS_WORKER_SOURCE = `export default {
  async fetch(request, env) {
    const entries = await Promise.all(env.TARGETS.map(async ({binding, service}) => {
      const response = await env[binding].fetch("http://counts/");
      return [service, await response.json()];
    }));
    return Response.json(Object.fromEntries(entries));
  },
};`

/** The worker-counts Worker of a shard whose counted Workers are `services` (workerd service names), or nothing when there is none. */
export function renderWorkerCountsServices(services: string[]): string[] {
  if (services.length === 0) return []
  const targets = services.map((service, index) => ({service, binding: `WORKER_${index}`}))
  const bindings = targets.map(
    ({binding, service}) => `(name = ${capnpString(binding)}, service = (name = ${capnpString(service)}, entrypoint = ${capnpString(COUNTS_ENTRYPOINT)}))`,
  )
  return [
    `(name = "${WORKER_COUNTS_SOCKET}", worker = (
      modules = [(name = "worker-counts.js", esModule = ${capnpString(COUNTS_WORKER_SOURCE)})],
      compatibilityDate = "2025-06-01",
      bindings = [${[...bindings, `(name = "TARGETS", json = ${capnpString(JSON.stringify(targets))})`].join(', ')}]))`,
  ]
}
