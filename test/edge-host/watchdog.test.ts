// The watchdog tells the host's own pause from a stalled process: while the host did not run (a
// loaded machine, a long GC) it could not read the process's answers, so that time does not count
// toward a stall window; a real stall is still caught once the host runs again. The process is a
// real one spinning on the CPU; the shard in front of it answers nothing, as a held thread does.
// Many short pauses count as much as one long one (before, only lateness past two intervals did).
import {spawn} from 'node:child_process'
import {setTimeout as sleep} from 'node:timers/promises'
import pino from 'pino'
import {afterEach, expect, test} from 'vitest'
import type {Shard} from '../../src/edge-host/runtime/shard.js'
import {Watchdog} from '../../src/edge-host/runtime/watchdog.js'

const CPU_LIMIT_MS = 2_000
const children: Array<ReturnType<typeof spawn>> = []

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
})

/** A watchdog over one shard in front of a real spinning process that answers nothing, as a held thread does. */
function watchSpinner(): {incidents: Array<{kind: string; script: string | null}>; watchdog: Watchdog} {
  const spinner = spawn(process.execPath, ['-e', 'for (;;) {}'], {stdio: 'ignore'})
  children.push(spinner)
  const incidents: Array<{kind: string; script: string | null}> = []
  const shard = {
    index: 0,
    pid: spinner.pid!,
    answered: 0,
    compiling: false,
    suspect: () => 'spinner',
    probe: () => new Promise<boolean>(() => {}),
    restartNow: async () => {},
    recycleIfStale: () => {},
  }
  const watchdog = new Watchdog({
    shards: () => [shard as unknown as Shard],
    intervalMs: 100,
    cpuLimitMs: CPU_LIMIT_MS,
    memoryLimitBytes: Number.MAX_SAFE_INTEGER,
    recycleMemoryBytes: null,
    onIncident: (_index, kind, script) => incidents.push({kind, script}),
    log: pino({level: 'silent'}),
  })
  watchdog.start()
  return {incidents, watchdog}
}

test("the host's own pause does not count toward a stall window, and the stall is caught after it", async () => {
  const {incidents, watchdog} = watchSpinner()
  try {
    await sleep(300) // a few ticks: the probe is out
    // The host does not run for longer than the CPU limit.
    const until = Date.now() + CPU_LIMIT_MS + 1_000
    while (Date.now() < until) {}
    await sleep(300)
    expect(incidents).toEqual([])
    await expect.poll(() => incidents, {timeout: 30_000}).toEqual([{kind: 'stall', script: 'spinner'}])
  } finally {
    watchdog.stop()
  }
})

test('many short pauses of the host (each under two intervals) do not add up to a stall; the stall is caught after them', async () => {
  const {incidents, watchdog} = watchSpinner()
  try {
    await sleep(300) // a few ticks: the probe is out
    // The host busy in bursts (as accepting an attacker's reconnect waves keeps it) for well over
    // the CPU limit: each burst delays the next tick by less than two intervals.
    const until = Date.now() + 2.5 * CPU_LIMIT_MS
    while (Date.now() < until) {
      const burst = Date.now() + 150
      while (Date.now() < burst) {}
      await sleep(1)
    }
    expect(incidents).toEqual([])
    await expect.poll(() => incidents, {timeout: 30_000}).toEqual([{kind: 'stall', script: 'spinner'}])
  } finally {
    watchdog.stop()
  }
})
