// KV get/put and D1 point queries from a Worker through the edge host, against the same Worker under
// miniflare (npm; what `wrangler dev` runs), data on disk for both, in one run, interleaved, ROUNDS
// rounds: p50 latency on one connection and ops/s on CONNECTIONS, medians, and each ratio (host ÷
// miniflare for ops/s, miniflare ÷ host for latency: ≥ 1.0× means the host is at least as good).
// KV get is also set against a raw SQLite read from Node (better-sqlite3): in-process (the read
// alone) and behind a Node HTTP server (the same request shape as the Worker's).
// The load generator is ../host/load.ts (its own process, keep-alive connections).
//
//   npm run build && node --import tsx bench/bindings/kv-d1.ts [--rounds 5] [--seconds 3] [--connections 8] [--only kv/get ...] [--front haproxy]
import {mkdtempSync, rmSync} from 'node:fs'
import http from 'node:http'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import Database from 'better-sqlite3'
import {Miniflare} from 'miniflare'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {pairHost, startBenchHost} from '../support/host.js'
import {runLoad} from '../support/load-run.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values} = parseArgs({
  options: {
    rounds: {type: 'string', default: '5'},
    seconds: {type: 'string', default: '3'},
    connections: {type: 'string', default: '8'},
    only: {type: 'string', multiple: true},
    // The host's front door (host.front): its data-plane hop is part of every request's cost.
    front: {type: 'string', default: 'node'},
  },
})
const ALL_OPERATIONS = ['no/binding', 'kv/get', 'kv/put', 'd1/get', 'kv/gets', 'd1/gets'] as const
const OPERATIONS = values.only ? ALL_OPERATIONS.filter((operation) => values.only!.includes(operation)) : ALL_OPERATIONS
const ROUNDS = Number(values.rounds)
const SECONDS = Number(values.seconds)
const CONNECTIONS = Number(values.connections)
const VALUE = 'v'.repeat(100)

/** Reads one request of kv/gets and d1/gets makes, one after another: the per-read cost with the request's own cost spread thin. */
const GETS_PER_REQUEST = 100

const WORKER = `const VALUE = ${JSON.stringify(VALUE)};
const GETS_PER_REQUEST = ${GETS_PER_REQUEST};
export default {
  async fetch(request, env) {
    const route = new URL(request.url).pathname.split("/").slice(-2).join("/");
    switch (route) {
      case "no/binding":
        return new Response(VALUE);
      case "kv/seed":
        await env.KV.put("k", VALUE);
        return new Response("ok");
      case "kv/get":
        return new Response(await env.KV.get("k"));
      case "kv/put":
        await env.KV.put("p", VALUE);
        return new Response("ok");
      case "d1/seed":
        await env.DB.exec("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, value TEXT)");
        await env.DB.batch(Array.from({length: 1000}, (_, id) => env.DB.prepare("INSERT OR REPLACE INTO items VALUES (?, ?)").bind(id, VALUE)));
        return new Response("ok");
      case "d1/get":
        return Response.json(await env.DB.prepare("SELECT value FROM items WHERE id = ?").bind(500).first());
      case "kv/gets": {
        let value;
        for (let get = 0; get < GETS_PER_REQUEST; get++) value = await env.KV.get("k");
        return new Response(value);
      }
      case "d1/gets": {
        let row;
        for (let get = 0; get < GETS_PER_REQUEST; get++) row = await env.DB.prepare("SELECT value FROM items WHERE id = ?").bind(500).first();
        return Response.json(row);
      }
    }
    return new Response("no such route", {status: 404});
  },
};`

const load = (url: string, connections: number) => runLoad(url, connections, SECONDS)

/** Requests that did not answer 200, per target and operation: printed with the figures. */
const failed = new Map<string, number>()

/**
 * p50 latency (one connection) and ops/s (CONNECTIONS) of GET `url`; of kv/gets and d1/gets, both on
 * one connection (reads one after another, like the in-process baseline's; many connections of them
 * hold workerd's thread long enough for the host's watchdog to take the shard for stalled).
 */
async function measure(url: string, key: string): Promise<{p50Ms: number; rps: number}> {
  const latency = await load(url, 1)
  const throughput = key.endsWith('gets') ? latency : await load(url, CONNECTIONS)
  failed.set(key, (failed.get(key) ?? 0) + latency.failures + (throughput === latency ? 0 : throughput.failures))
  return {p50Ms: latency.p50Ms, rps: throughput.rps}
}

/** The in-process read: ops/s of a prepared statement for SECONDS, and its p50 over batches of 1000. */
function rawSqliteRead(db: Database.Database): {p50Ms: number; rps: number} {
  const read = db.prepare('SELECT value FROM kv WHERE key = ?').pluck()
  const perRead: number[] = []
  const until = performance.now() + SECONDS * 1000
  let reads = 0
  const began = performance.now()
  while (performance.now() < until) {
    const batch = performance.now()
    for (let index = 0; index < 1000; index++) if (read.get('k') !== VALUE) throw new Error('raw read answered something else')
    perRead.push((performance.now() - batch) / 1000)
    reads += 1000
  }
  return {p50Ms: median(perRead), rps: reads / ((performance.now() - began) / 1000)}
}

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-kv-d1-'))
const host = await startBenchHost({settings: {shards: 1, front: values.front as 'node' | 'haproxy'}})
const miniflare = new Miniflare({
  modules: true,
  script: WORKER,
  compatibilityDate: '2025-06-01',
  kvNamespaces: {KV: 'kv'},
  d1Databases: {DB: 'db'},
  kvPersist: path.join(root, 'miniflare-kv'),
  d1Persist: path.join(root, 'miniflare-d1'),
  host: '127.0.0.1',
  port: 0,
})
const sqlite = new Database(path.join(root, 'raw.sqlite'))
sqlite.pragma('journal_mode = WAL')
sqlite.exec('CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB)')
sqlite.prepare('INSERT INTO kv VALUES (?, ?)').run('k', VALUE)
const nodeRead = sqlite.prepare('SELECT value FROM kv WHERE key = ?').pluck()
const nodeServer = http.createServer((_request, response) => response.end(nodeRead.get('k') as string))
await new Promise<void>((resolve) => nodeServer.listen(0, '127.0.0.1', resolve))
const nodeUrl = `http://127.0.0.1:${(nodeServer.address() as AddressInfo).port}/kv/get`

try {
  const client = host.client(await pairHost(host.adminUrl, host.pairingCode!))
  const script = scriptNameFor('bench-bindings-kv-d1')
  await client.deploy(
    script,
    moduleUpload(WORKER, [
      {type: 'kv_namespace', name: 'KV', namespaceId: 'kv'},
      {type: 'd1_database', name: 'DB', databaseId: 'db'},
    ]),
  )
  const bases = {host: `${host.publicUrl}/${script}`, miniflare: (await miniflare.ready).toString().replace(/\/$/, '')}
  for (const base of Object.values(bases)) {
    for (const seed of ['kv/seed', 'd1/seed']) {
      const response = await fetch(`${base}/${seed}`)
      if (response.status !== 200) throw new Error(`${base}/${seed}: ${response.status} ${await response.text()}`)
    }
  }
  // no/binding: the same request answered without a binding call, for the cost of the path around it.
  // kv/gets and d1/gets: GETS_PER_REQUEST reads per request, their figures counted per read.
  const operations = OPERATIONS
  const figures = new Map<string, Array<{p50Ms: number; rps: number}>>()
  const record = (key: string, figure: {p50Ms: number; rps: number}) => figures.set(key, [...(figures.get(key) ?? []), figure])
  for (let round = 1; round <= ROUNDS; round++) {
    // Interleaved, the order alternating, so drift in the machine's load falls on both alike.
    const order = round % 2 === 1 ? (['host', 'miniflare'] as const) : (['miniflare', 'host'] as const)
    for (const operation of operations)
      for (const target of order) record(`${target} ${operation}`, await measure(`${bases[target]}/${operation}`, `${target} ${operation}`))
    record('node-http kv/get', await measure(nodeUrl, 'node-http kv/get'))
    record('node-raw kv/get', rawSqliteRead(sqlite))
    log(`round ${round}: ${[...figures].map(([key, list]) => `${key} ${list.at(-1)!.rps.toFixed(0)}/s ${list.at(-1)!.p50Ms.toFixed(3)} ms`).join(', ')}`)
  }
  // Per read for the operations that make GETS_PER_REQUEST of them in a request.
  const reads = (key: string) => (key.endsWith('gets') ? GETS_PER_REQUEST : 1)
  const medianOf = (key: string) => ({
    p50Ms: median(figures.get(key)!.map((f) => f.p50Ms)) / reads(key),
    rps: median(figures.get(key)!.map((f) => f.rps)) * reads(key),
  })
  const row = (label: string, subject: string, baseline: string) => {
    const a = medianOf(subject)
    const b = medianOf(baseline)
    console.log(
      `| ${label} | ${subject}: ${a.rps.toFixed(0)} ops/s, p50 ${a.p50Ms.toFixed(3)} ms | ${baseline}: ${b.rps.toFixed(0)} ops/s, p50 ${b.p50Ms.toFixed(3)} ms | ` +
        `ops/s ${(a.rps / b.rps).toFixed(2)}×, latency ${(b.p50Ms / a.p50Ms).toFixed(2)}× |`,
    )
  }
  const failures = [...failed].filter(([, count]) => count > 0).map(([key, count]) => `${key} ${count}`)
  console.log(`${ROUNDS} rounds interleaved, p50 on 1 connection, ops/s on ${CONNECTIONS} connections for ${SECONDS} s; ${machineLoad()}`)
  console.log(`requests not answered 200: ${failures.length === 0 ? 'none' : failures.join(', ')}`)
  for (const operation of operations) row(`${operation} ÷ miniflare`, `host ${operation}`, `miniflare ${operation}`)
  const measured = (operation: string) => operations.includes(operation as (typeof OPERATIONS)[number])
  if (measured('kv/get')) {
    row('kv/get ÷ Node HTTP + SQLite read', 'host kv/get', 'node-http kv/get')
    row('kv/get ÷ raw SQLite read in-process', 'host kv/get', 'node-raw kv/get')
  }
  if (measured('kv/gets')) {
    row(`kv get, ${GETS_PER_REQUEST} a request, per get ÷ raw SQLite read in-process`, 'host kv/gets', 'node-raw kv/get')
    row(`the same under miniflare ÷ raw SQLite read in-process`, 'miniflare kv/gets', 'node-raw kv/get')
  }
} finally {
  nodeServer.close()
  sqlite.close()
  await miniflare.dispose()
  await host.stop()
  rmSync(root, {recursive: true, force: true})
}
