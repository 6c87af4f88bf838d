// Backup fence benchmarks.
//
// (a) Round trip: `fence begin` + `fence end` through the engine (store record, host ack, host lift,
//     store record, audit rows; republish off) on a SQLite store against a real edge host, against
//     the bare host round trip — the same two signed calls straight to the host, no store — measured
//     alternately in the same run.
// (b) Republish: 1,000 deploys deferred by a fence, republished by one run of the deferred lane after
//     the lift (claim oldest first, publish with compare-and-set, clear the marker), against the
//     recovery lane dispatching 1,000 ordinary stalled rows in the same run. Both use a dispatch that
//     does to each row what the deploy task does without a host (lease by id, settle completed), so
//     the figures are the lanes' own cost. SQLite and PostgreSQL (EDGEWORKERS_BENCH_PG_URL, else an
//     embedded server with fsync on).
//
//   node --import tsx bench/fence/run.ts [--rounds 30] [--rows 1000]
//
// Prints Markdown tables for BENCHMARKS.md.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {FileArtifactStore} from '../../src/artifacts/store.js'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine, silentLogger, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {EDGE_HOST_FENCED} from '../../src/protocol/management-api.js'
import {beginFence, endFence} from '../../src/engine/fence/lifecycle.js'
import {runPass} from '../../src/engine/pass/index.js'
import {OnPremProvider} from '../../src/provider/onprem/client.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import type {EdgeProvider} from '../../src/provider/types.js'
import {openStore, type Backend, type Store} from '../../src/store/index.js'
import {startBenchHost} from '../support/host.js'
import {leaseAndSettle, onEachBackend, seedBenchWorker, type BenchWorker} from '../support/passes.js'
import {log, median, percentile} from '../support/stats.js'

const {values: options} = parseArgs({options: {rounds: {type: 'string', default: '30'}, rows: {type: 'string', default: '1000'}}})
const ROUNDS = Number(options.rounds)
const ROWS = Number(options.rows)
const SCOPE = 'onprem:0123456789ab'
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-fence-'))

async function main(): Promise<void> {
  try {
    const roundTrip = await benchRoundTrip()
    const republish = await onEachBackend(workDir, 'edgeworkers_bench_fence', benchRepublish)
    console.log(`\n${new Date().toISOString()}\n`)
    console.log('| round trip | rounds | median ms | p90 ms | min ms |')
    console.log('|---|---|---|---|---|')
    for (const [name, times] of Object.entries(roundTrip)) {
      console.log(`| ${name} | ${times.length} | ${median(times).toFixed(1)} | ${percentile(times, 90).toFixed(1)} | ${Math.min(...times).toFixed(1)} |`)
    }
    console.log(`\nratio of medians: ${(median(roundTrip['fence begin + end (kit)']!) / median(roundTrip['bare host begin + end']!)).toFixed(2)}\n`)
    console.log('| backend | rows | deferred republish s | rows/s | recovery baseline s | republish ÷ baseline (time) |')
    console.log('|---|---|---|---|---|---|')
    for (const r of republish) {
      console.log(
        `| ${r.backend} | ${ROWS} | ${r.republishSeconds.toFixed(2)} | ${(ROWS / r.republishSeconds).toFixed(0)} | ${r.baselineSeconds.toFixed(2)} | ${(r.republishSeconds / r.baselineSeconds).toFixed(2)} |`,
      )
    }
  } finally {
    rmSync(workDir, {recursive: true, force: true})
  }
}

/** (a) Alternating kit and bare round trips against one real host. */
async function benchRoundTrip(): Promise<Record<string, number[]>> {
  const host = await startBenchHost({maxFenceTtlSeconds: 600})
  const settings = settingsSchema.parse({data_dir: path.join(workDir, 'round-trip')})
  const store = await openStore(settings)
  try {
    await store.migrate()
    const pairing = await pairWithHost(host.adminUrl, host.pairingCode!, 10_000)
    await store.kit.savePairing(pairing)
    const engine = await createEngine(store, settings, onPremHosts)
    const bare = new OnPremProvider({
      baseUrl: host.adminUrl,
      scope: pairing.scope,
      secret: pairing.shared_secret,
      connectTimeoutMs: 5_000,
      readTimeoutMs: 10_000,
    })
    const times: Record<string, number[]> = {'fence begin + end (kit)': [], 'bare host begin + end': []}
    for (let round = 0; round < ROUNDS; round++) {
      let started = performance.now()
      const fence = await beginFence(engine, {reason: 'bench', ttlSeconds: 60})
      await endFence(engine, {fenceId: fence.id, republish: false})
      times['fence begin + end (kit)']!.push(performance.now() - started)

      started = performance.now()
      await bare.beginFence({fenceId: `bare-${round}`, ttlSeconds: 60, reason: 'bench'})
      await bare.endFence(`bare-${round}`)
      times['bare host begin + end']!.push(performance.now() - started)
    }
    log(`round trip: kit ${median(times['fence begin + end (kit)']!).toFixed(1)} ms, bare ${median(times['bare host begin + end']!).toFixed(1)} ms (medians)`)
    return times
  } finally {
    await store.close()
    await host.stop()
  }
}

/** (b) The deferred lane over ROWS fenced rows vs the recovery lane over ROWS stalled rows. */
async function benchRepublish(backend: Backend, url: string): Promise<{backend: Backend; republishSeconds: number; baselineSeconds: number}> {
  const settings = settingsSchema.parse({data_dir: workDir, store: {url}, reconcile: {lane_budget_seconds: 3_600}})
  const tenMinutesAgo = {now: () => Date.now() - 600_000}
  const seeding = await openStore(settings, {clock: tenMinutesAgo})
  const store = await openStore(settings)
  try {
    await seeding.migrate()
    const worker = await seedBenchWorker(seeding)
    const engine: Engine = {
      store,
      settings,
      artifacts: await FileArtifactStore.open(workDir),
      log: silentLogger,
      owner: 'bench-fence',
      hosts: onPremHosts,
      resolveProvider: async () => ({
        status: 'ready',
        scope: SCOPE,
        provider: {scope: SCOPE, fenceStatus: async () => ({active: null, recent: []})} as unknown as EdgeProvider,
      }),
    }

    // Alternating, twice each, keeping the second: the first lane to run pays for warming up.
    let republishSeconds = 0
    let baselineSeconds = 0
    for (let round = 0; round < 2; round++) {
      await seedRows(seeding, worker, `deferred-${round}`, EDGE_HOST_FENCED)
      let started = performance.now()
      const deferred = (await runPass(engine, {lanes: ['deferred'], dispatchDeploy: leaseAndSettle(SCOPE)})).lanes[0]!
      republishSeconds = (performance.now() - started) / 1000
      if (deferred.completed !== ROWS || deferred.error)
        throw new Error(`${backend}: republished ${deferred.completed} of ${ROWS}${deferred.error ? `: ${deferred.error}` : ''}`)

      await seedRows(seeding, worker, `stalled-${round}`, null)
      started = performance.now()
      const recovery = (await runPass(engine, {lanes: ['recovery'], dispatchDeploy: leaseAndSettle(SCOPE)})).lanes[0]!
      baselineSeconds = (performance.now() - started) / 1000
      if (recovery.completed !== ROWS || recovery.error) throw new Error(`${backend}: recovered ${recovery.completed} of ${ROWS}`)
    }
    log(`${backend}: republish ${republishSeconds.toFixed(2)} s, recovery baseline ${baselineSeconds.toFixed(2)} s`)
    return {backend, republishSeconds, baselineSeconds}
  } finally {
    await seeding.close()
    await store.close()
  }
}

/** ROWS deploy rows written ten minutes ago: deferred ones (with the fence's code), or stalled ones a dead deploy reserved. */
async function seedRows(store: Store, worker: BenchWorker, kind: string, marker: string | null): Promise<void> {
  for (let start = 0; start < ROWS; start += 500) {
    await store.transaction(async (tx) => {
      for (let i = start; i < Math.min(ROWS, start + 500); i++) {
        await tx.outbox.enqueue({
          operation: 'deploy',
          dedupe_key: `deploy:${kind}:${worker.id}:${i}`,
          dispatch_namespace: SCOPE,
          company_id: 'bench',
          department_id: 'bench-ops',
          worker_id: worker.id,
          version_id: worker.versionId,
          script_name: worker.script_name,
          payload: {releaseGeneration: 'rg', baseRevision: i},
          ...(marker ? {status: 'deferred' as const, last_error_code: marker} : {reserved_by: 'deploy-that-died'}),
        })
      }
    })
  }
}

await main()
