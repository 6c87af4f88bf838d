// The loader Worker (host.code_loading = "loader"): one per shard, on the shard's `loader` socket. It
// runs the Workers without Durable Objects deployed after the shard's process started through
// workerd's Worker Loader, so a deploy loads the new code into the running process instead of
// restarting it (and its neighbours); the process's next start puts them on their own sockets.
//
// The data plane sends each request with the load id it pinned (LOAD_HEADER, `<script>:<release
// generation>:<n>`, a new n for every change of code or env). The first request for an id makes
// workerd call back for the code, which the loader fetches from the host's code listener
// (../edge-host/runtime/code-server.ts); later ones reuse the loaded Worker. The Worker gets the same env as under the
// restart path: values, its service bindings (a loopback entrypoint that names the target to the
// host's service-binding listener, which the Worker cannot reach itself, and the caller it counts), the `egress` network as its
// global fetch, and the shard's tail Worker code, with its script name in the props.
//
// workerd never unloads a loaded Worker: the shard counts the ones it replaced and is recycled
// through the restart path past a bound (see Shard).

/** The socket (and service) of the loader Worker in a shard's config. */
export const LOADER_SOCKET = 'loader'
/** The load id a request is for; set by the host, never forwarded from a client. */
export const LOAD_HEADER = 'x-edgeworkers-load'
/** A request with this header only loads the id (the host's warm-up); no handler of the Worker runs. */
export const WARM_HEADER = 'x-edgeworkers-warm'
/** The RPC method the warm-up calls: the Worker has none by this name, but loading it runs its top level. */
const WARM_METHOD = '__edgeworkersWarm'

/**
 * The loader's main module. `tailModule`: the module name of the shard's tail Worker, bundled with
 * the loader (loaded Workers' traces go to it), or null without Worker events. `experimental`
 * (host.experimental): loaded Workers may use flags workerd marks experimental, as they may under the
 * restart path on such a host; the validation sandbox refuses them on any other host.
 */
export function loaderWorkerSource(options: {
  tailModule: string | null
  serviceTargetHeader: string
  serviceCallerHeader: string
  experimental: boolean
}): string {
  const tailed = options.tailModule !== null
  return `import {WorkerEntrypoint} from "cloudflare:workers";
${tailed ? `import tailWorker from ${JSON.stringify(options.tailModule)};` : ''}
const LOAD_HEADER = ${JSON.stringify(LOAD_HEADER)};
const WARM_HEADER = ${JSON.stringify(WARM_HEADER)};

export class ServiceBinding extends WorkerEntrypoint {
  fetch(request) {
    const forwarded = new Request(request);
    forwarded.headers.set(${JSON.stringify(options.serviceTargetHeader)}, this.ctx.props.target);
    forwarded.headers.set(${JSON.stringify(options.serviceCallerHeader)}, this.ctx.props.caller);
    return this.env.HOST_SERVICES.fetch(forwarded);
  }
}
${
  tailed
    ? `
export class Tail extends WorkerEntrypoint {
  tail(events) {
    const traces = events.filter((trace) => trace.event?.rpcMethod !== ${JSON.stringify(WARM_METHOD)});
    if (traces.length > 0) return tailWorker.tail(traces, this.env, this.ctx);
  }
}
`
    : ''
}
function moduleOf(module) {
  switch (module.type) {
    case "esModule": return {js: module.text};
    case "commonJs": return {cjs: module.text};
    case "text": return {text: module.text};
    case "json": return {json: JSON.parse(module.text)};
    case "data": return {data: Uint8Array.from(atob(module.base64), (c) => c.charCodeAt(0)).buffer};
    case "wasm": return {wasm: Uint8Array.from(atob(module.base64), (c) => c.charCodeAt(0)).buffer};
  }
  throw new Error("unknown module type " + module.type);
}

export default {
  async fetch(request, env, ctx) {
    const id = request.headers.get(LOAD_HEADER);
    if (id === null) return new Response("no load id", {status: 400});
    const worker = env.LOADER.get(id, async () => {
      const answer = await env.CODE.fetch("http://code/" + encodeURIComponent(id));
      if (!answer.ok) throw new Error("the host has no code for " + id + " (" + answer.status + ")");
      const code = await answer.json();
      const workerEnv = {};
      for (const binding of code.values) workerEnv[binding.name] = "text" in binding ? binding.text : JSON.parse(binding.json);
      for (const binding of code.services) workerEnv[binding.name] = ctx.exports.ServiceBinding({props: {target: binding.target, caller: code.script}});
      return {
        compatibilityDate: code.compatibilityDate,
        compatibilityFlags: code.compatibilityFlags,${options.experimental ? '\n        allowExperimental: true,' : ''}
        mainModule: code.mainModule,
        modules: Object.fromEntries(code.modules.map((module) => [module.name, moduleOf(module)])),
        env: workerEnv,
        globalOutbound: env.EGRESS,
        tails: [${tailed ? 'ctx.exports.Tail({props: {script: code.script}})' : ''}],
      };
    });
    if (request.headers.has(WARM_HEADER)) {
      await worker.getEntrypoint().${WARM_METHOD}().catch((error) => {
        if (!String(error).includes("does not implement the method")) throw error;
      });
      return new Response("loaded");
    }
    const headers = new Headers(request.headers);
    headers.delete(LOAD_HEADER);
    return worker.getEntrypoint().fetch(new Request(request, {headers}));
  },
};
`
}
