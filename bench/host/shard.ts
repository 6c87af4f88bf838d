// 2. Deploy time for a shard holding 1 and 64 scripts: loaded in place (host.code_loading = loader),
// and both swap modes of the restart path (overlap: no script of the shard has Durable Objects,
// nothing waits; hold: one has, requests wait for the swap), and the whole upload → live time of a
// redeploy; 3. resident memory per 100 scripts (the shard's workerd, in both code-loading modes, and
// the host process). Both are read on the same hosts, one per mode.
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import type {RunningHost} from '../../src/edge-host/host.js'
import {scriptNameFor} from '../support/fixtures.js'
import type {HostClient} from '../support/host.js'
import {median} from '../support/stats.js'
import {SWAPS, workDir} from './options.js'
import {deployMany, rssMiB, shardPid, shardPids, startMeasuredHost, swapHistogram, timedScript, type SwapMode} from './support.js'

/** Redeploys one script `SWAPS` times: median swap time (from the host's metrics) and upload → live time. */
async function measureSwaps(host: RunningHost, client: HostClient, name: string, mode: SwapMode): Promise<{swapMs: number; deployMs: number}> {
  const swaps: number[] = []
  const total: number[] = []
  for (let round = 0; round < SWAPS; round++) {
    const before = await swapHistogram(host, mode)
    const began = performance.now()
    await client.deploy(name, timedScript(mode, round))
    total.push(performance.now() - began)
    const after = await swapHistogram(host, mode)
    // A load counts each deploy's in-place load; one deploy may also find nothing new (a coalesced one).
    if (after.count < before.count + 1) throw new Error(`expected a ${mode} swap, saw ${after.count - before.count}`)
    swaps.push((after.sum - before.sum) * 1000)
  }
  return {swapMs: median(swaps), deployMs: median(total)}
}

/** Measures, and answers the Markdown lines of its tables. */
export async function measureShards(): Promise<string[]> {
  // 2 and 3. Deploy time at 1 and 64 scripts in each mode; memory at 0 and 100 scripts, on one shard.
  const swaps: Array<{mode: SwapMode; scripts: number; swapMs: number; deployMs: number}> = []
  const memory: Array<{mode: SwapMode; emptyMiB: number; fullMiB: number}> = []
  let fullHostRss = 0
  for (const mode of ['load', 'overlap', 'hold'] as const) {
    const {host, client} = await startMeasuredHost(path.join(workDir, `swap-${mode}`), {code_loading: mode === 'load' ? 'loader' : 'restart'})
    const timed = scriptNameFor(`bench/timed-${mode}`)
    const emptyMiB = rssMiB(shardPid(host))
    await client.deploy(timed, timedScript(mode, -1))
    swaps.push({mode, scripts: 1, ...(await measureSwaps(host, client, timed, mode))})
    await deployMany(client, 1, 64)
    swaps.push({mode, scripts: 64, ...(await measureSwaps(host, client, timed, mode))})
    if (mode !== 'hold') {
      await deployMany(client, 64, 100)
      for (let index = 1; index < 100; index++) await (await fetch(`${host.publicUrl}/${scriptNameFor(`bench/${index}`)}/`)).text()
      await (await fetch(`${host.publicUrl}/${timed}/`)).text()
      // A recycle or the last swaps' replaced processes may still be running: read once one runs.
      while (shardPids(host).length > 1) await sleep(100)
      memory.push({mode, emptyMiB, fullMiB: rssMiB(shardPid(host))})
      fullHostRss = rssMiB(process.pid)
    }
    await host.stop()
  }
  return [
    '',
    `Deploy into a shard (median of ${SWAPS} redeploys of one script; load: loaded into the running process; requests wait for the swap only in hold mode):`,
    '',
    '| mode | scripts in the shard | load or swap ms | upload → live ms |',
    '|---|---|---|---|',
    ...swaps.map((swap) => `| ${swap.mode} | ${swap.scripts} | ${swap.swapMs.toFixed(0)} | ${swap.deployMs.toFixed(0)} |`),
    '',
    "Resident memory of the shard's workerd, 0 → 100 scripts (each served once):",
    '',
    '| code loading | 0 scripts MiB | 100 scripts MiB | per 100 scripts MiB |',
    '|---|---|---|---|',
    ...memory.map(
      (entry) =>
        `| ${entry.mode === 'load' ? 'loader' : 'restart'} | ${entry.emptyMiB.toFixed(0)} | ${entry.fullMiB.toFixed(0)} | ${(entry.fullMiB - entry.emptyMiB).toFixed(0)} |`,
    ),
    '',
    `The host process itself (node, state and proxy) held ${fullHostRss.toFixed(0)} MiB with 100 scripts; it does not grow per script beyond its GC noise.`,
  ]
}
