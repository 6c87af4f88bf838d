// The Worker the gradual-deployment tests split (test/deploy/gradual-*.test.ts): a project of one
// version, answering with an `x-version` header, that reads and writes its KV namespace, D1
// database and R2 bucket, sends to its queue and records what its queue() consumed (in KV, with the
// consuming version), and reads its own static assets through its ASSETS binding.

const WORKER = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get("key");
    const value = url.searchParams.get("value");
    const answer = (body) => new Response(body ?? "(none)", {headers: {"x-version": env.VERSION}});
    const table = () => env.DB.prepare("CREATE TABLE IF NOT EXISTS kept (k TEXT PRIMARY KEY, v TEXT)").run();
    switch (url.pathname) {
      case "/kv/put": await env.CACHE.put(key, value); return answer("ok");
      case "/kv/get": return answer(await env.CACHE.get(key));
      case "/d1/put": await table(); await env.DB.prepare("INSERT OR REPLACE INTO kept VALUES (?, ?)").bind(key, value).run(); return answer("ok");
      case "/d1/get": await table(); return answer((await env.DB.prepare("SELECT v FROM kept WHERE k = ?").bind(key).first())?.v);
      case "/r2/put": await env.BUCKET.put(key, value); return answer("ok");
      case "/r2/get": return answer(await (await env.BUCKET.get(key))?.text());
      case "/queue/send": await env.JOBS.send(value); return answer("ok");
      case "/binding-asset": return answer(await (await env.ASSETS.fetch(new URL("/version.txt", url))).text());
    }
    return answer("worker");
  },
  async queue(batch, env) {
    for (const message of batch.messages) await env.CACHE.put("consumed:" + message.body, env.VERSION);
  },
};
`

/** A project of version `version`: with KV, D1, R2 and a queue (produced and consumed) when `data`, with static assets always. */
export function splitWorkerFiles(version: string, data: boolean): Record<string, string> {
  const toml = [
    'name = "split"',
    'main = "worker.js"',
    'compatibility_date = "2025-06-01"',
    `vars = {VERSION = "${version}"}`,
    'assets = {directory = "public", binding = "ASSETS"}',
    ...(data
      ? [
          'kv_namespaces = [{binding = "CACHE", id = "cache"}]',
          'd1_databases = [{binding = "DB", database_name = "db", database_id = "db"}]',
          'r2_buckets = [{binding = "BUCKET", bucket_name = "bucket"}]',
          'queues.producers = [{binding = "JOBS", queue = "jobs"}]',
          'queues.consumers = [{queue = "jobs", max_batch_size = 1}]',
        ]
      : []),
  ]
  return {'wrangler.toml': toml.join('\n'), 'worker.js': WORKER, 'public/version.txt': `assets of ${version}`}
}
