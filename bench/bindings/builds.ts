// What a change costs Workers, per build: `host serve` of each --bin build (e.g. this tree's and
// main's), in turn, round by round, serving a Worker without bindings and one that reads a KV key on
// each request; ops/s on CONNECTIONS connections and p50 on one, medians, and each build's ratio to
// the first. Shows whether binding-operation counting (or any change) costs the Worker anything.
//
//   npm run build && node --import tsx bench/bindings/builds.ts --bin bin/run.js --bin ../main/bin/run.js [--rounds 5] [--seconds 3]
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {HostClient, pairHost} from '../support/host.js'
import {pairingCodeOf, serveHost} from '../support/serve.js'
import {runLoad} from '../support/load-run.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values} = parseArgs({
  options: {
    bin: {type: 'string', multiple: true, default: ['bin/run.js']},
    rounds: {type: 'string', default: '5'},
    seconds: {type: 'string', default: '3'},
    connections: {type: 'string', default: '8'},
  },
})
const ROUNDS = Number(values.rounds)
const SECONDS = Number(values.seconds)
const CONNECTIONS = Number(values.connections)
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const WORKERS = {
  'no binding': {source: 'export default { fetch() { return new Response("v".repeat(100)) } }', bindings: []},
  'KV get': {
    source: 'export default { async fetch(request, env) { return new Response(await env.KV.get("k") ?? await env.KV.put("k", "v".repeat(100)) ?? "seeded") } }',
    bindings: [{type: 'kv_namespace' as const, name: 'KV', namespaceId: 'kv'}],
  },
}

const load = (url: string, connections: number) => runLoad(url, connections, SECONDS)

/** One round of one build: a fresh host serving both Workers; each measured for p50 (1 connection) and ops/s. */
async function round(bin: string): Promise<Record<string, {rps: number; p50Ms: number}>> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ew-bench-builds-'))
  const {child, adminUrl, publicUrl} = await serveHost(bin, dataDir, {env: {EDGEWORKERS_HOST__SHARDS: '1'}})
  try {
    const client = new HostClient(adminUrl, await pairHost(adminUrl, await pairingCodeOf(bin, dataDir)))
    const figures: Record<string, {rps: number; p50Ms: number}> = {}
    for (const [label, worker] of Object.entries(WORKERS)) {
      const script = scriptNameFor(`bench-builds-${label}`)
      await client.deploy(script, moduleUpload(worker.source, worker.bindings))
      const url = `${publicUrl}/${script}/`
      await fetch(url).then((response) => response.text())
      const latency = await load(url, 1)
      const throughput = await load(url, CONNECTIONS)
      if (latency.failures + throughput.failures > 0) throw new Error(`${bin} ${label}: failed requests`)
      figures[label] = {rps: throughput.rps, p50Ms: latency.p50Ms}
    }
    return figures
  } finally {
    child.kill('SIGTERM')
    await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)))
    rmSync(dataDir, {recursive: true, force: true})
  }
}

const bins = values.bin.map((bin) => path.resolve(ROOT, bin))
const results = new Map(bins.map((bin) => [bin, [] as Array<Record<string, {rps: number; p50Ms: number}>>]))
for (let index = 0; index < ROUNDS; index++) {
  // Each round runs the builds in turn, the order alternating, so drift in the machine's load falls on all alike.
  for (const bin of index % 2 === 0 ? bins : [...bins].reverse()) {
    results.get(bin)!.push(await round(bin))
    log(`round ${index + 1} ${bin}: ${JSON.stringify(results.get(bin)!.at(-1))}`)
  }
}
console.log(`${ROUNDS} rounds, ops/s on ${CONNECTIONS} connections, p50 on 1, ${SECONDS} s each; ${machineLoad()}`)
const first = bins[0]!
for (const label of Object.keys(WORKERS)) {
  const of = (bin: string) => ({
    rps: median(results.get(bin)!.map((figures) => figures[label]!.rps)),
    p50Ms: median(results.get(bin)!.map((figures) => figures[label]!.p50Ms)),
  })
  for (const bin of bins) {
    const figure = of(bin)
    const ratio = `ops/s ${(figure.rps / of(first).rps).toFixed(2)}×, p50 ${(figure.p50Ms / of(first).p50Ms).toFixed(2)}× of the first build`
    console.log(`| ${label} | ${path.relative(ROOT, bin)} | ${figure.rps.toFixed(0)} ops/s | p50 ${figure.p50Ms.toFixed(3)} ms | ${ratio} |`)
  }
}
