// The watchdog tells a held thread from a slow process. The host's own pause: while the host did not
// run (a loaded machine, a long GC) it could not read the process's answers, so that time does not
// count toward a stall window; a real stall is still caught once the host runs again. Many short
// pauses count as much as one long one (before, only lateness past two intervals did). The
// process's own slowness: stopped, or starved of the CPU while its thread is held legitimately for
// a while (a garbage collection stretched by a busy machine: 100–150 ms of CPU over 600 ms without
// an answer was judged a stall and its shard killed), it is left alone; a spinning one starved the
// same way is still caught. A process that grows by hundreds of MB without answering (a Worker
// allocating without bound) is a memory runaway long before any absolute limit; one that grows as
// much while answering is not. The processes are real ones, started with a parent-death signal (a
// killed test run leaves none spinning); the shard in front of them answers nothing, as a held
// thread does, unless the test says so.
import {spawn} from 'node:child_process'
import {setTimeout as sleep} from 'node:timers/promises'
import pino from 'pino'
import {afterEach, expect, test} from 'vitest'
import type {Shard} from '../../src/edge-host/runtime/shard.js'
import {Watchdog} from '../../src/edge-host/runtime/watchdog.js'
import {DEATH_SIGNAL_WRAPPER} from '../../src/workerd/process.js'

const CPU_LIMIT_MS = 2_000
const children: Array<ReturnType<typeof spawn>> = []

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
})

/** A watchdog over one shard in front of a real spinning process that answers nothing, as a held thread does. */
function watchSpinner(): Watched {
  return watch(spawnChild(['-e', 'for (;;) {}']), CPU_LIMIT_MS)
}

/** `command` (node by default) with `args`, killed by the kernel should this test process die first. */
function spawnChild(args: string[], command: string[] = [process.execPath]): ReturnType<typeof spawn> {
  const [file, ...rest] = [...DEATH_SIGNAL_WRAPPER, ...command, ...args]
  const child = spawn(file!, rest, {stdio: ['pipe', 'pipe', 'ignore']})
  children.push(child)
  return child
}

interface Watched {
  incidents: Array<{kind: string; script: string | null}>
  watchdog: Watchdog
  /** The shard in front of the process: its `answered` grows when the test says the process answered; `probes` sent. */
  shard: {answered: number; probes: number}
}

/** A watchdog (limit `cpuLimitMs`) over one shard in front of `child`; the shard's probe is never answered. */
function watch(child: ReturnType<typeof spawn>, cpuLimitMs: number): Watched {
  const incidents: Array<{kind: string; script: string | null}> = []
  const shard = {
    index: 0,
    pid: child.pid!,
    answered: 0,
    probes: 0,
    compiling: false,
    suspect: () => 'spinner',
    probe: () => {
      shard.probes++
      return new Promise<boolean>(() => {})
    },
    restartNow: async () => {},
    recycleIfStale: () => {},
  }
  const watchdog = new Watchdog({
    shards: () => [shard as unknown as Shard],
    intervalMs: 100,
    cpuLimitMs,
    memoryLimitBytes: Number.MAX_SAFE_INTEGER,
    recycleMemoryBytes: null,
    onIncident: (_index, kind, script) => incidents.push({kind, script}),
    log: pino({level: 'silent'}),
  })
  watchdog.start()
  return {incidents, watchdog, shard}
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

/** The default limit, and a hold like those the host's judgement was fooled by: ~110 ms of CPU, stretched past the limit. */
const DEFAULT_CPU_LIMIT_MS = 500
const HOLD_CPU_MS = 110
/** Hogs sharing the one CPU the held process is pinned to: it gets about a tenth of it, so each hold lasts ~1.1 s or more. */
const HOGS = 9

/** A starved CPU: HOGS spinning processes pinned to CPU 0. The command prefix that pins a process beside them. */
function starvedCpu(): string[] {
  const pinned = ['taskset', '-c', '0', process.execPath]
  for (let hog = 0; hog < HOGS; hog++) spawnChild(['-e', 'for (;;) {}'], pinned)
  return pinned
}

test('a thread held briefly (a GC) on a starved CPU, answering after each hold, is not a stall; a spinning one there is', {timeout: 120_000}, async () => {
  const pinned = starvedCpu()
  // Holds its thread for HOLD_CPU_MS of CPU, answers (prints the hold's wall-clock ms), sleeps a little, again.
  const holder = spawnChild(
    [
      '-e',
      `const hold = () => { const start = process.cpuUsage(); const began = Date.now(); for (;;) { const used = process.cpuUsage(start); if (used.user + used.system >= ${HOLD_CPU_MS * 1000}) break }; console.log(Date.now() - began); setTimeout(hold, 20) }; hold()`,
    ],
    pinned,
  )
  const held = watch(holder, DEFAULT_CPU_LIMIT_MS)
  const wallMs: number[] = []
  holder.stdout!.on('data', (chunk: Buffer) => {
    const holds = chunk.toString().trim().split('\n').map(Number)
    wallMs.push(...holds)
    held.shard.answered += holds.length
  })
  try {
    // Several holds, each past the limit on the wall clock without an answer.
    await expect.poll(() => wallMs.filter((ms) => ms > DEFAULT_CPU_LIMIT_MS).length, {timeout: 90_000, interval: 100}).toBeGreaterThanOrEqual(4)
    expect(held.incidents).toEqual([])
  } finally {
    held.watchdog.stop()
  }

  const spinning = watch(spawnChild(['-e', 'for (;;) {}'], pinned), DEFAULT_CPU_LIMIT_MS)
  try {
    await expect.poll(() => spinning.incidents, {timeout: 60_000}).toEqual([{kind: 'stall', script: 'spinner'}])
  } finally {
    spinning.watchdog.stop()
  }
})

test('a stopped process is not a stall however long it is stopped; spinning once continued, it is', {timeout: 60_000}, async () => {
  const child = spawnChild(['-e', 'for (;;) {}'])
  child.kill('SIGSTOP')
  const {incidents, watchdog} = watch(child, DEFAULT_CPU_LIMIT_MS)
  try {
    // Stopped for ten times the limit: the probe goes unanswered all along.
    const stoppedUntil = Date.now() + 10 * DEFAULT_CPU_LIMIT_MS
    await expect.poll(() => Date.now() >= stoppedUntil, {timeout: 30_000}).toBe(true)
    expect(incidents).toEqual([])
    child.kill('SIGCONT')
    await expect.poll(() => incidents, {timeout: 30_000}).toEqual([{kind: 'stall', script: 'spinner'}])
  } finally {
    watchdog.stop()
  }
})

/** MB a child allocates (and touches) per step, and the steps: 640 MB in all, far past the growth allowed while held. */
const STEP_MB = 32
const STEPS = 20

test('a process growing by hundreds of MB without answering is a memory runaway, whatever its limit', {timeout: 60_000}, async () => {
  // Told to (once the watchdog watches it), allocates its 640 MB in one go, then idles (burning no
  // CPU, so the stall rule never judges it).
  const child = spawnChild([
    '-e',
    `const hoard = []; process.stdin.once('data', () => { for (let step = 0; step < ${STEPS}; step++) hoard.push(Buffer.alloc(${STEP_MB} << 20, 1)) }); setInterval(() => hoard.length, 1_000)`,
  ])
  const {incidents, watchdog, shard} = watch(child, CPU_LIMIT_MS)
  try {
    await expect.poll(() => shard.probes).toBeGreaterThan(0)
    child.stdin!.write('go\n')
    await expect.poll(() => incidents, {timeout: 30_000}).toEqual([{kind: 'memory', script: 'spinner'}])
  } finally {
    watchdog.stop()
  }
})

test('a process growing as much while it answers is not', {timeout: 60_000}, async () => {
  // The same 640 MB, one step at a time, answering (a line) after each step.
  const child = spawnChild([
    '-e',
    `const hoard = []; const step = () => { hoard.push(Buffer.alloc(${STEP_MB} << 20, 1)); console.log(hoard.length); if (hoard.length < ${STEPS}) setTimeout(step, 150) }; step(); setInterval(() => hoard.length, 1_000)`,
  ])
  const watched = watch(child, CPU_LIMIT_MS)
  let steps = 0
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = chunk.toString().trim().split('\n').length
    steps += lines
    watched.shard.answered += lines
  })
  try {
    await expect.poll(() => steps, {timeout: 30_000}).toBe(STEPS)
    // Every step sampled by a few more ticks of the watchdog after the last.
    const sampledUntil = Date.now() + 500
    await expect.poll(() => Date.now() >= sampledUntil).toBe(true)
    expect(watched.incidents).toEqual([])
  } finally {
    watched.watchdog.stop()
  }
})
