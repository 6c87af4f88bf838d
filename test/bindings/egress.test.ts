// A Worker with KV, D1, R2, a queue and a cron trigger still gets no private-network egress, under both
// host.code_loading modes: its fetch(), queue() and scheduled() each try the host's own management
// listener (127.0.0.1) and are refused, and record what happened in KV.
import {request} from 'undici'
import {describe, expect, test} from 'vitest'
import {kitWithHost} from '../support/cli-kit.js'

const WORKER = `
async function probe(target) {
  try {
    const response = await fetch(target);
    return "reached " + response.status;
  } catch (error) {
    return "blocked";
  }
}
export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/probe") {
      await env.JOBS.send("probe");
      return new Response(await probe(env.TARGET));
    }
    const {keys} = await env.SEEN.list();
    return Response.json(Object.fromEntries(await Promise.all(keys.map(async (key) => [key.name, await env.SEEN.get(key.name)]))));
  },
  async queue(batch, env) {
    for (const message of batch.messages) {
      await env.SEEN.put("queue", await probe(env.TARGET));
      message.ack();
    }
  },
  async scheduled(controller, env) {
    await env.SEEN.put("scheduled", await probe(env.TARGET));
  },
};`

describe.each(['restart', 'loader'] as const)('code_loading = %s', (codeLoading) => {
  let now = Date.parse('2030-01-01T00:00:30Z')
  const kit = kitWithHost(`egress-${codeLoading}`, {settings: {shards: 1, code_loading: codeLoading}, cronClock: () => now})

  test('fetch(), queue() and scheduled() of a Worker with every binding cannot reach a private address', {timeout: 180_000}, async () => {
    const toml = [
      'name = "prober"',
      'main = "worker.js"',
      'compatibility_date = "2025-06-01"',
      'triggers = {crons = ["* * * * *"]}',
      `vars = {TARGET = "${kit.host.adminUrl}/livez"}`,
      '[[kv_namespaces]]',
      'binding = "SEEN"',
      '[[d1_databases]]',
      'binding = "DB"',
      '[[r2_buckets]]',
      'binding = "FILES"',
      '[[queues.producers]]',
      'binding = "JOBS"',
      'queue = "jobs"',
      '[[queues.consumers]]',
      'queue = "jobs"',
      'max_batch_timeout = 0',
    ].join('\n')
    const {url} = await kit.deploy(kit.project('prober', {'wrangler.toml': toml, 'worker.js': WORKER}))
    // The listener answers whoever may reach it: the probe's refusal is the Worker's, not the target's.
    expect((await request(`${kit.host.adminUrl}/livez`)).statusCode).toBe(200)

    const probed = await request(`${url.replace(/\/$/, '')}/probe`)
    expect(await probed.body.text()).toBe('blocked')
    await kit.host.host.runDueCronTriggers()
    now = Date.parse('2030-01-01T00:01:00Z') + 100
    await kit.host.host.runDueCronTriggers()
    await expect.poll(async () => (await request(url)).body.json(), {timeout: 60_000, interval: 200}).toEqual({queue: 'blocked', scheduled: 'blocked'})
  })
})
