// 5. A host holding WORKERS Workers (default shard count, under the loader): a redeploy of one until
// it serves, the workerd memory against one bare workerd holding the same scripts, and a host restart
// until all serve (each asked once) against that bare workerd's start until each served once.
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {machineLoad, median} from '../support/stats.js'
import {CONNECTIONS, DEFAULT_SHARDS, WORKERS, workDir} from './options.js'
import {deployMany, restartsOf, rssMiB, shardPids, startBareWorkerdWith, startMeasuredHost, swapHistogram, variant} from './support.js'

/**
 * 5. WORKERS distinct Workers on a host with the default shard count: a redeploy of one until it
 * serves, workerd memory, and a restart until all serve; against one bare workerd holding them all.
 */
async function measureManyWorkers(): Promise<{
  redeployMs: number
  /** Of it, the in-place load (the host's swap histogram, mode load). */
  redeployLoadMs: number
  /** Bare workerd processes the baseline needed (1, or the shard count when one could not start them all), and why. */
  bareProcesses: number
  bareError: string | null
  hostWorkerdMiB: number
  bareMiB: number
  hostStartMs: number
  bareStartMs: number
  loadMs: number
  failed: Record<string, number>
  restarts: string[]
}> {
  const dir = path.join(workDir, 'many')
  let {host, client} = await startMeasuredHost(dir, {shards: DEFAULT_SHARDS, code_loading: 'loader'})
  const loadBegan = performance.now()
  // 25 uploads at a time: on a loaded machine 100 at once outwait the management listener's request timeout.
  for (let from = 0; from < WORKERS; from += 25) await deployMany(client, from, Math.min(WORKERS, from + 25))
  const loadMs = performance.now() - loadBegan
  /** Answers other than 200, by status, over every serveAll. */
  const failed: Record<string, number> = {}
  /** Asks every Worker once, CONNECTIONS at a time. */
  const serveAll = async (origin: (index: number) => string) => {
    let next = 0
    const worker = async () => {
      for (let index = next++; index < WORKERS; index = next++) {
        const response = await fetch(origin(index))
        if (response.status !== 200) failed[response.status] = (failed[response.status] ?? 0) + 1
        await response.text()
      }
    }
    await Promise.all(Array.from({length: CONNECTIONS}, worker))
  }
  await serveAll((index) => `${host.publicUrl}/${scriptNameFor(`bench/${index}`)}/`)
  // Replaced processes of the last swaps may still be draining: read once each shard runs one.
  while (shardPids(host).length > DEFAULT_SHARDS) await sleep(100)
  const hostWorkerdMiB = shardPids(host).reduce((sum, pid) => sum + rssMiB(pid), 0)
  const redeploys: number[] = []
  const redeployLoads: number[] = []
  for (let round = 0; round < 3; round++) {
    const name = scriptNameFor('bench/7')
    const before = await swapHistogram(host, 'load')
    const began = performance.now()
    await client.deploy(name, moduleUpload(`${variant(7)}// redeploy ${round}\n`))
    redeploys.push(performance.now() - began)
    redeployLoads.push(((await swapHistogram(host, 'load')).sum - before.sum) * 1000)
  }
  const restarts = await restartsOf(host)
  await host.stop()
  const restartBegan = performance.now()
  ;({host, client} = await startMeasuredHost(dir, {shards: DEFAULT_SHARDS, code_loading: 'loader'}, client.secret))
  await serveAll((index) => `${host.publicUrl}/${scriptNameFor(`bench/${index}`)}/`)
  const hostStartMs = performance.now() - restartBegan
  await host.stop()

  const sources = Array.from({length: WORKERS}, (_, index) => ({name: `w${index}`, source: variant(index)}))
  // One bare workerd holding them all; where it cannot start them (at 2,000 small Workers V8 ran out
  // of heap here), as many bare processes as the host has shards, split as the host splits them.
  let bareError: string | null = null
  let bareProcesses = 1
  let bare = await startBareWorkerds([sources]).catch((error: unknown) => {
    bareError =
      String(error)
        .split('\n')
        .find((line) => /fatal|error/i.test(line)) ?? String(error).slice(0, 200)
    return null
  })
  if (!bare) {
    bareProcesses = DEFAULT_SHARDS
    bare = await startBareWorkerds(Array.from({length: DEFAULT_SHARDS}, (_, shard) => sources.filter((_, index) => index % DEFAULT_SHARDS === shard)))
  }
  await serveAll((index) => `http://127.0.0.1:${bare.port(`w${index}`)}/`)
  const bareStartMs = performance.now() - bare.began
  const bareMiB = bare.processes.reduce((sum, process) => sum + rssMiB(process.pid), 0)
  await Promise.all(bare.processes.map((process) => process.stop()))
  return {
    redeployMs: median(redeploys),
    redeployLoadMs: median(redeployLoads),
    hostWorkerdMiB,
    bareMiB,
    bareProcesses,
    bareError,
    hostStartMs,
    bareStartMs,
    loadMs,
    failed,
    restarts,
  }
}

/** Bare workerd processes, one per group of scripts, started together; `began`: when they were asked to start. */
async function startBareWorkerds(groups: Array<Array<{name: string; source: string}>>) {
  const began = performance.now()
  const processes = (await Promise.all(groups.map((group, index) => startBareWorkerdWith(group, `many-bare-${groups.length}-${index}`)))).map(
    (bare) => bare.process,
  )
  const port = (name: string) => processes.map((process) => process.ports.get(name)).find((port) => port !== undefined)
  return {began, processes, port}
}

/** Measures, and answers the Markdown lines of its table and aims. */
export async function measureMany(): Promise<string[]> {
  const many = await measureManyWorkers()
  return [
    '',
    `${new Date().toISOString()}, ${machineLoad()}`,
    '',
    `${WORKERS} Workers on ${DEFAULT_SHARDS} shards (loaded in batches of 25 in ${(many.loadMs / 1000).toFixed(0)} s):`,
    '',
    many.bareError === null
      ? '| measure | host | one bare workerd, same scripts | ratio |'
      : `| measure | host | ${many.bareProcesses} bare workerd, same scripts split as the host splits them (one could not start them: ${many.bareError.replaceAll('|', '/')}) | ratio |`,
    '|---|---|---|---|',
    `| workerd resident memory, every script served once, MiB | ${many.hostWorkerdMiB.toFixed(0)} | ${many.bareMiB.toFixed(0)} | ${(many.hostWorkerdMiB / many.bareMiB).toFixed(2)} |`,
    `| start until each served once, ms (host: a restart of it) | ${many.hostStartMs.toFixed(0)} | ${many.bareStartMs.toFixed(0)} | ${(many.hostStartMs / many.bareStartMs).toFixed(2)} |`,
    '',
    `Answers other than 200 while asking each Worker once: ${JSON.stringify(many.failed)}; restarts and incidents before the host restart: ${many.restarts.join(', ') || 'none'}.`,
    `Aim: deploy of one → serving ≤ 250 ms — measured **${many.redeployMs.toFixed(0)} ms** (median of 3 redeploys, upload → live; of it the in-place load ${many.redeployLoadMs.toFixed(0)} ms, the rest mostly the validation sandbox). Aim: memory ≤ 1.3× bare — measured **${(many.hostWorkerdMiB / many.bareMiB).toFixed(2)}×**.`,
  ]
}
