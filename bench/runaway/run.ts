// Runaway neighbour under load (issue #29, hole 4), for BENCHMARKS.md: a real `edgeworkers host
// serve` process with default settings (4 shards). A spinning Worker shares shard 0 with Worker A,
// a memory-allocating Worker shares shard 1 with Worker B, and Worker C runs on shard 2; closed-loop
// clients keep A, B and C busy throughout. Each offender is requested once per incident, 3 times
// (the third quarantines it). Per incident and neighbour: the outage — the longest stretch without
// a successful answer, from the offending request until 1 s after its answer — and the failed
// requests (anything but 200). The baseline is the same measure over an equal quiet stretch right
// before each incident. Several `--bin` builds (e.g. main's) are run in turn, round by round. Each
// incident's line gives the wall-clock times of the offending request and of the longest gap, to read
// beside the host log's (--host-log: the watchdog's verdict, the kill).
//
//   npm run build && node --import tsx bench/runaway/run.ts [--rounds 2] [--clients 4] [--bin bin/run.js --bin …] [--host-log file]
import {mkdtempSync, openSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {request} from 'undici'
import type {UploadScript} from '../../src/protocol/management-api.js'
import {HostClient, pairHost} from '../support/host.js'
import {pairingCodeOf, serveHost} from '../support/serve.js'
import {log, machineLoad, median} from '../support/stats.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const {values: options} = parseArgs({
  options: {
    rounds: {type: 'string', default: '2'},
    clients: {type: 'string', default: '4'},
    bin: {type: 'string', multiple: true, default: ['bin/run.js']},
    'host-log': {type: 'string'},
  },
})
const ROUNDS = Number(options.rounds)
const CLIENTS = Number(options.clients)
const INCIDENTS = 3
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const name = (digit: string) => `dw-${digit.repeat(48)}`
const WORKERS = {a: name('a'), b: name('b'), c: name('c'), d: name('d'), spin: name('e'), bomb: name('f')}
const answering = (text: string) => `export default { fetch() { return new Response(${JSON.stringify(text)}) } }`
const SPIN = 'export default { fetch() { for (;;) {} } }'
const BOMB = 'export default { fetch() { const hoard = []; for (;;) hoard.push(new Uint8Array(16 << 20).fill(1)) } }'

function upload(source: string): UploadScript {
  return {
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    builderPolicy: 'department-worker-project-v2.9',
    releaseGeneration: `bench-${Buffer.from(source).toString('base64url').slice(0, 40)}`,
    modules: [{name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')}],
  } as UploadScript
}

const deploy = (adminUrl: string, secret: string, script: string, source: string) => new HostClient(adminUrl, secret).deploy(script, upload(source))

interface Answer {
  at: number
  ok: boolean
}

/** Closed-loop clients on one Worker until stopped; every answer with its end time. */
function load(publicUrl: string, script: string, expected: string) {
  const answers: Answer[] = []
  let running = true
  const client = async () => {
    while (running) {
      let ok = false
      try {
        const response = await request(`${publicUrl}/${script}/`, {headersTimeout: 60_000, bodyTimeout: 60_000})
        ok = response.statusCode === 200 && (await response.body.text()) === expected
      } catch {}
      answers.push({at: performance.now(), ok})
    }
  }
  const clients = Array.from({length: CLIENTS}, client)
  return {
    answers,
    stop: async () => {
      running = false
      await Promise.all(clients)
    },
  }
}

/** Wall-clock time of day of a performance.now() reading, as the host log's timestamps read. */
const clock = (at: number) => new Date(performance.timeOrigin + at).toISOString().slice(11, 23)

/** The longest stretch in [from, to] without a successful answer (and when it was), and the failed answers in it. */
function outage(answers: Answer[], from: number, to: number): {ms: number; failed: number; gap?: string} {
  let last = from
  let longest = 0
  let failed = 0
  let gap = ''
  for (const answer of answers) {
    if (answer.at < from || answer.at > to) continue
    if (!answer.ok) failed++
    else {
      if (answer.at - last > longest) gap = `${clock(last)}-${clock(answer.at)}`
      longest = Math.max(longest, answer.at - last)
      last = answer.at
    }
  }
  return {ms: Math.max(longest, to - last), failed, gap}
}

interface Figures {
  /** Per offender kind, per incident: the shard-mate's outage and failures; the far Worker's outage. */
  incidents: Record<'spin' | 'bomb', Array<{mate: {ms: number; failed: number}; far: {ms: number; failed: number}; baseline: number; offender: number}>>
}

async function round(bin: string): Promise<Figures> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ew-bench-runaway-'))
  // --host-log: the host's warnings (the watchdog's verdicts, with their timings) go to that file.
  const hostLog = options['host-log'] ? openSync(options['host-log'], 'a') : 'ignore'
  const {child, adminUrl, publicUrl} = await serveHost(bin, dataDir, {stdio: ['ignore', hostLog, hostLog]})
  try {
    const code = await pairingCodeOf(bin, dataDir)
    const secret = await pairHost(adminUrl, code)
    // Least-loaded placement, lowest index first: a→0, b→1, c→2, d→3, spin→0, bomb→1.
    for (const key of ['a', 'b', 'c', 'd'] as const) await deploy(adminUrl, secret, WORKERS[key], answering(key))
    await deploy(adminUrl, secret, WORKERS.spin, SPIN)
    await deploy(adminUrl, secret, WORKERS.bomb, BOMB)
    const loads = {a: load(publicUrl, WORKERS.a, 'a'), b: load(publicUrl, WORKERS.b, 'b'), c: load(publicUrl, WORKERS.c, 'c')}
    const figures: Figures = {incidents: {spin: [], bomb: []}}
    await sleep(2_000)
    for (const [kind, mate] of [
      ['spin', loads.a],
      ['bomb', loads.b],
    ] as const) {
      for (let incident = 1; incident <= INCIDENTS; incident++) {
        const began = performance.now()
        const answer = await request(`${publicUrl}/${WORKERS[kind]}/`, {headersTimeout: 120_000}).then(
          (response) => response.body.dump().then(() => response.statusCode),
          () => 0,
        )
        const answered = performance.now()
        await sleep(1_000)
        const ended = performance.now()
        const quiet = ended - began
        await sleep(quiet) // the baseline stretch, just as long, with no incident in it
        const baseline = outage(mate.answers, ended, ended + quiet).ms
        figures.incidents[kind].push({
          mate: outage(mate.answers, began, ended),
          far: outage(loads.c.answers, began, ended),
          baseline,
          offender: Math.round(answered - began),
        })
        log(
          `${bin} ${kind} #${incident}: offender sent ${clock(began)}, ${answer} after ${Math.round(answered - began)} ms; ${JSON.stringify(figures.incidents[kind].at(-1))}`,
        )
      }
    }
    await Promise.all(Object.values(loads).map((l) => l.stop()))
    return figures
  } finally {
    child.kill('SIGTERM')
    await new Promise((resolve) => child.once('exit', resolve))
    rmSync(dataDir, {recursive: true, force: true})
  }
}

log(`machine: ${machineLoad()}`)
const bins = options.bin.map((bin) => path.resolve(ROOT, bin))
const results = new Map<string, Figures[]>(bins.map((bin) => [bin, []]))
for (let index = 0; index < ROUNDS; index++) for (const bin of bins) results.get(bin)!.push(await round(bin))
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`
console.log(`\nload: ${machineLoad()}; ${ROUNDS} rounds, ${CLIENTS} clients per Worker\n`)
console.log(
  '| build | offender | incident | shard-mate outage (median, max) | shard-mate failed (max) | baseline (median) | ratio | other shard outage (max) |',
)
console.log('|---|---|---|---|---|---|---|---|')
for (const [bin, rounds] of results) {
  for (const kind of ['spin', 'bomb'] as const) {
    for (let incident = 0; incident < INCIDENTS; incident++) {
      const rows = rounds.map((figures) => figures.incidents[kind][incident]!)
      const mate = rows.map((row) => row.mate.ms)
      const baseline = median(rows.map((row) => row.baseline))
      console.log(
        `| ${path.relative(ROOT, bin)} | ${kind} | ${incident + 1} | ${seconds(median(mate))}, ${seconds(Math.max(...mate))} | ${Math.max(...rows.map((row) => row.mate.failed))} | ${seconds(baseline)} | ${(median(mate) / baseline).toFixed(1)} | ${seconds(Math.max(...rows.map((row) => row.far.ms)))} |`,
      )
    }
  }
}
process.exit(0)
