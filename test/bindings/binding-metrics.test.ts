// Per-Worker binding metrics against a real edge host running real workerd: a Worker's KV, D1, R2 and
// queue calls are counted by binding, operation and outcome (a refusal or failed statement is an
// error, a missing key or object is not), exactly once across scrapes, including the calls made
// just before a redeploy replaced the process; the series go when the Worker is retired.
import {request} from 'undici'
import {describe, expect, test} from 'vitest'
import {kitWithHost} from '../support/cli-kit.js'

const WORKER = `export default {
  async fetch(request, env) {
    const tried = async (call) => { try { await call(); } catch {} };
    switch (new URL(request.url).pathname) {
      case "/kv":
        await env.CACHE.put("a", "1");
        await env.CACHE.put("b", "2");
        await env.CACHE.get("a");
        await env.CACHE.get("missing");
        await env.CACHE.list();
        await env.CACHE.delete("b");
        await tried(() => env.CACHE.put("c", "3", {expirationTtl: 1}));
        break;
      case "/d1":
        await env.DB.exec("CREATE TABLE IF NOT EXISTS t (n INTEGER)");
        await env.DB.prepare("INSERT INTO t VALUES (?)").bind(1).run();
        await env.DB.prepare("SELECT n FROM t").all();
        await env.DB.batch([env.DB.prepare("SELECT 1"), env.DB.prepare("SELECT 2")]);
        await tried(() => env.DB.prepare("SELECT * FROM no_such_table").all());
        break;
      case "/r2":
        await env.BUCKET.put("k", "v");
        await (await env.BUCKET.get("k")).text();
        await env.BUCKET.get("missing");
        await env.BUCKET.head("k");
        await env.BUCKET.list();
        await env.BUCKET.delete("k");
        break;
      case "/queue":
        await env.JOBS.send("one");
        await env.JOBS.sendBatch([{body: "two"}, {body: "three"}]);
        await tried(() => env.JOBS.send("x".repeat(200 * 1024)));
        break;
    }
    return new Response("done");
  },
  async queue() {},
};`

const WRANGLER_TOML = (vars: string) =>
  [
    'name = "counted"',
    'main = "worker.js"',
    'compatibility_date = "2025-06-01"',
    `vars = {VERSION = "${vars}"}`,
    'kv_namespaces = [{binding = "CACHE", id = "cache"}]',
    'd1_databases = [{binding = "DB", database_name = "db", database_id = "db"}]',
    'r2_buckets = [{binding = "BUCKET", bucket_name = "bucket"}]',
    'queues.producers = [{binding = "JOBS", queue = "jobs"}]',
    'queues.consumers = [{queue = "jobs"}]',
  ].join('\n')

/** The calls each route makes: `${type} ${binding} ${operation} ${outcome}` → count. */
const COUNTS: Record<string, Record<string, number>> = {
  '/kv': {'kv CACHE put ok': 2, 'kv CACHE get ok': 2, 'kv CACHE list ok': 1, 'kv CACHE delete ok': 1, 'kv CACHE put error': 1},
  '/d1': {'d1 DB execute ok': 2, 'd1 DB query ok': 1, 'd1 DB batch ok': 1, 'd1 DB query error': 1},
  '/r2': {'r2 BUCKET put ok': 1, 'r2 BUCKET get ok': 2, 'r2 BUCKET head ok': 1, 'r2 BUCKET list ok': 1, 'r2 BUCKET delete ok': 1},
  '/queue': {'queue JOBS send ok': 1, 'queue JOBS sendBatch ok': 1, 'queue JOBS send error': 1},
}

describe('binding operation metrics', () => {
  const kit = kitWithHost('binding-metrics', {settings: {shards: 1}})

  /** The script's binding-operation series of one scrape: `${type} ${binding} ${operation} ${outcome}` → value. */
  const scrape = async (script: string, department: string): Promise<Record<string, number>> => {
    const text = await (await fetch(`${kit.host.adminUrl}/metrics`)).text()
    const series: Record<string, number> = {}
    for (const line of text.split('\n')) {
      if (!line.startsWith('edgeworkers_host_worker_binding_operations_total{') || !line.includes(`script="${script}"`)) continue
      const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((match) => [match[1], match[2]]))
      expect(labels.department).toBe(department)
      series[`${labels.type} ${labels.binding} ${labels.operation} ${labels.outcome}`] = Number(line.split(' ').at(-1))
    }
    return series
  }
  const call = async (url: string, route: string) => {
    const response = await request(new URL(route.slice(1), url))
    expect([response.statusCode, await response.body.text()]).toEqual([200, 'done'])
  }
  const times = (counts: Record<string, number>, factor: number) => Object.fromEntries(Object.entries(counts).map(([key, value]) => [key, value * factor]))

  test('every binding call is counted once, by binding, operation and outcome, across scrapes and a redeploy', {timeout: 180_000}, async () => {
    const dir = kit.project('counted', {'wrangler.toml': WRANGLER_TOML('1'), 'worker.js': WORKER})
    const {url, department, script} = await kit.deploy(dir)
    expect(await scrape(script, department)).toEqual({})
    for (const route of Object.keys(COUNTS)) await call(url, route)
    const once = Object.assign({}, ...Object.values(COUNTS)) as Record<string, number>
    expect(await scrape(script, department)).toEqual(once)
    // A scrape takes what was counted since the last one: nothing is counted twice.
    expect(await scrape(script, department)).toEqual(once)

    // Calls made right before a redeploy replaces the process are read from it before it stops.
    await call(url, '/kv')
    await kit.deploy(kit.project('counted-v2', {'wrangler.toml': WRANGLER_TOML('2'), 'worker.js': WORKER}), department)
    await call(url, '/kv')
    expect(await scrape(script, department)).toEqual({...once, ...times(COUNTS['/kv']!, 3)})

    // Retiring the Worker removes its series.
    expect((await kit.cli('retire', department, '--yes')).code).toBe(0)
    expect(await scrape(script, department)).toEqual({})
  })
})
