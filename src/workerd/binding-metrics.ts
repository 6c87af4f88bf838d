// Counting the binding operations of a shard's Workers (KV, D1, R2, Queues), for the host's metrics.
//
// Each binding service Worker (./kv-worker.ts, ./d1-worker.ts, ./r2-worker.ts, ./queue-worker.ts)
// counts the calls it answers in its isolate's memory — binding name → operation → [answered,
// failed] — with BINDING_COUNTS_SOURCE: an increment per call, nothing sent anywhere. The binding's
// name reaches the service in the props the host writes (`binding`), next to the namespace, database,
// bucket or queue. The shard's `binding-metrics` socket runs a Worker bound to every binding service
// of the shard with props {metrics: true}, which no Worker's own binding has: on a request it asks
// each service for its counts, which the service hands over and resets, and answers them all. The
// host reads that socket when /metrics is scraped and before it stops a process
// (../edge-host/binding-operations.ts), so the counts are deltas and only a crash loses the last ones.
// A shard none of whose Workers has such a binding has neither the socket nor the Worker: Workers
// without bindings pay nothing.
import {capnpString} from './capnp.js'

/** The socket (and service) of the shard's binding-metrics Worker; present only when a Worker of the shard has a binding service. */
export const BINDING_METRICS_SOCKET = 'binding-metrics'

/** The kinds of binding service, as the `type` label names them. */
export type BindingType = 'kv' | 'd1' | 'r2' | 'queue'

/** Binding name → operation → [answered, failed], as a service hands them over. */
export type BindingCounts = Record<string, Record<string, [number, number]>>

/** What the binding-metrics socket answers: each binding service's counts since the last read. */
export type ShardBindingCounts = Array<{script: string; type: BindingType; counts: BindingCounts}>

/** The counting part of each binding service's source: countOperation() per call; a metrics read takes the counts. */
export const BINDING_COUNTS_SOURCE = `
let operationCounts = {};
function countOperation(binding, operation, failed) {
  if (typeof binding !== "string") return;
  const byOperation = (operationCounts[binding] ??= {});
  (byOperation[operation] ??= [0, 0])[failed ? 1 : 0]++;
}
function takeOperationCounts() {
  const taken = operationCounts;
  operationCounts = {};
  return Response.json(taken);
}`

const METRICS_WORKER_SOURCE = `export default {
  async fetch(request, env) {
    return Response.json(await Promise.all(env.TARGETS.map(async ({binding, script, type}) => {
      const response = await env[binding].fetch("http://metrics/");
      return {script, type, counts: await response.json()};
    })));
  },
};`

/** The binding services of one script, by the service name each has in the shard's config. */
export type BindingServices = Array<{service: string; type: BindingType}>

/**
 * The binding-metrics Worker of a shard whose scripts have the binding `services` (script → its
 * services), or nothing when none has any.
 */
export function renderBindingMetricsServices(services: Map<string, BindingServices>): string[] {
  const targets = [...services]
    .flatMap(([script, list]) => list.map(({service, type}) => ({script, type, service})))
    .map((target, index) => ({...target, binding: `SERVICE_${index}`}))
  if (targets.length === 0) return []
  const props = capnpString(JSON.stringify({metrics: true}))
  const bindings = targets.map(
    ({binding, service}) => `(name = ${capnpString(binding)}, service = (name = ${capnpString(service)}, props = (json = ${props})))`,
  )
  const described = JSON.stringify(targets.map(({binding, script, type}) => ({binding, script, type})))
  return [
    `(name = "${BINDING_METRICS_SOCKET}", worker = (
      modules = [(name = "binding-metrics.js", esModule = ${capnpString(METRICS_WORKER_SOURCE)})],
      compatibilityDate = "2025-06-01",
      bindings = [${[...bindings, `(name = "TARGETS", json = ${capnpString(described)})`].join(', ')}]))`,
  ]
}
