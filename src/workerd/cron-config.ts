// The shard's cron Worker: how the host runs a script's scheduled() handler. workerd has no timer of
// its own for cron triggers; the host's scheduler (../edge-host/triggers/cron-scheduler.ts) posts
// {script, cron, scheduledTime} to the shard's `cron` socket, and the cron Worker calls
// `scheduled()` on its service binding to that script — workerd's own scheduled event, so the
// Worker gets a real ScheduledController (cron, scheduledTime, noRetry) and its trace reaches the
// tail Worker as any invocation does. Fetcher.scheduled() needs workerd's experimental
// `service_binding_extra_handlers` flag: a shard with cron triggers runs workerd in experimental
// mode, which gives no Worker of it an experimental flag (uploads are validated without it).
// A script with cron triggers has its own service in the config (under both code-loading modes) so
// the binding can name it.

import {capnpString} from './capnp.js'

/** The socket (and service) of the cron Worker in a shard's config; present only when a script has cron triggers. */
export const CRON_SOCKET = 'cron'

const CRON_WORKER_SOURCE = `export default {
  async fetch(request, env) {
    const {script, cron, scheduledTime} = await request.json();
    const target = env[script];
    if (!target) return new Response("no such script in this shard", {status: 404});
    return Response.json(await target.scheduled({cron, scheduledTime: new Date(scheduledTime)}));
  },
};`

export function usesCrons(script: {crons: string[]}): boolean {
  return script.crons.length > 0
}

/** The cron Worker for the scripts with cron triggers, or nothing when none has any. */
export function renderCronServices(scripts: Array<{name: string; crons: string[]}>): string[] {
  const scheduled = scripts.filter(usesCrons)
  if (scheduled.length === 0) return []
  const bindings = scheduled.map((script) => `(name = ${capnpString(script.name)}, service = ${capnpString(script.name)})`)
  return [
    `(name = "${CRON_SOCKET}", worker = (
      modules = [(name = "cron.js", esModule = ${capnpString(CRON_WORKER_SOURCE)})],
      compatibilityDate = "2025-06-01",
      compatibilityFlags = ["service_binding_extra_handlers"],
      bindings = [${bindings.join(', ')}],
      globalOutbound = "egress"))`,
  ]
}
