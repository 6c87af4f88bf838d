// Edge host benchmark, all in one run:
//   1. requests/s and p50/p99 latency of fixtures/workers/hello through the host (data plane →
//      shard → script) against the same script on a bare workerd process (the baseline), and the ratio;
//      beside them the other data-plane options, each in front of (or inside) a bare workerd: a plain
//      Node proxy (http server + undici dispatch, no logic), a raw node:http proxy (keep-alive agent,
//      piped bodies), and routing inside workerd (a router Worker calling the script through a
//      service binding, no Node hop). For each: the CPU time per request of the hop process (the
//      Node proxy; this process for the host) and of workerd, read from /proc over the same rounds.
//      The host runs in both code-loading modes: loader (the Worker runs in the shard's loader
//      Worker) and restart (the Worker has its own socket);
//   2. deploy time for a shard holding 1 and 64 scripts: loaded in place (host.code_loading =
//      loader), and both swap modes of the restart path (overlap: no script of the shard has Durable
//      Objects, nothing waits; hold: one has, requests wait for the swap), and the whole upload → live
//      time of a redeploy;
//   3. resident memory per 100 scripts (the shard's workerd, in both code-loading modes, and the host process);
//   4. what deploys of Worker A do to Worker B of the same shard (under the loader): B under sustained load (and holding
//      open WebSockets) during DEPLOYS redeploys of A, against B under the same load without deploys
//      right before: failed requests, requests slower than 4× the undisturbed p99, closed WebSockets;
//   5. a host holding WORKERS Workers (default shard count, under the loader): a redeploy of one until it serves, the
//      workerd memory against one bare workerd holding the same scripts, and a host restart until all
//      serve (each asked once) against that bare workerd's start until each served once.
//
//   node --import tsx bench/host/run.ts [--seconds 10] [--connections 32] [--rounds 3] [--swaps 5] [--deploys 100] [--workers 2000] [--sections plane,neighbours,many]
//
// Each benchmark is a file here: 1 ./throughput.ts, 2 and 3 ./shard.ts (read on the same hosts),
// 4 ./neighbours.ts, 5 ./many-workers.ts; what they share is ./support.ts and ./options.ts. The load
// generator (./load.ts) runs as its own process. Prints a Markdown summary for BENCHMARKS.md.
import {rmSync} from 'node:fs'
import {machineLoad} from '../support/stats.js'
import {measureMany} from './many-workers.js'
import {measureNeighbours} from './neighbours.js'
import {SECTIONS, workDir} from './options.js'
import {measureShards} from './shard.js'
import {measureThroughput} from './throughput.js'

async function main(): Promise<void> {
  console.error(`# ${machineLoad()}`)
  if (SECTIONS.has('plane')) {
    const throughput = await measureThroughput()
    console.log([...throughput, ...(await measureShards())].join('\n'))
  }
  // Each section prints as soon as it is measured: a long run that is cut short keeps what it had.
  if (SECTIONS.has('neighbours')) console.log((await measureNeighbours()).join('\n'))
  if (SECTIONS.has('many')) console.log((await measureMany()).join('\n'))
}

try {
  await main()
} finally {
  rmSync(workDir, {recursive: true, force: true})
}
