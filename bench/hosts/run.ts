// Many edge hosts per kit (docs/many-hosts.md), measured with real processes in one run: `host serve`
// processes (real workerd, host.await_kit_confirmation on, 1 shard each), kits driven through the
// built CLI, and Debian's HAProxy on the configuration `edgeworkers lb config --haproxy` writes.
//   (a) Deploy reach: `edgeworkers deploy` (waiting) from its start until every host of the kit
//       answers the new body on its data plane — a 3-host kit against a 1-host kit (the baseline),
//       rounds alternating between them; medians and their ratio.
//   (b) kill -9 under load: CONNECTIONS clients GET a stateless Worker through HAProxy back to back;
//       after SECONDS/3 one of the 3 hosts is killed with SIGKILL; the run goes on until SECONDS.
//       Failed requests are counted before the kill, between the kill and HAProxy marking the host
//       DOWN (its stats socket), and after; throughput after the kill against before it (the
//       baseline, same round). The host is then started again, a reconcile pass confirms it, and
//       HAProxy marks it UP before the next round.
//   (c) Placement (owner alone, routed by HAProxy): the same Worker code deployed twice to the 3-host
//       kit, once stateless (on every host, round robin) and once with a cron trigger (so it has an
//       owner host and HAProxy routes it to that host alone); CONNECTIONS clients GET each through
//       HAProxy for SECONDS/2, rounds alternating; req/s and p50 of the owned one ÷ the other's.
//
//   npm run build && node --import tsx bench/hosts/run.ts [--rounds 5] [--seconds 12] [--connections 16]
import {mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {Agent, request} from 'undici'
import {runCli} from '../support/cli.js'
import {project as textProjectIn} from '../support/deploy-backlog.js'
import {freePort, startHaproxy, type RunningHaproxy} from '../support/haproxy.js'
import {pairingCodeOf, serveHost, type ServedHost} from '../support/serve.js'
import {log, machineLoad, median} from '../support/stats.js'
import {fileURLToPath} from 'node:url'

const {values: options} = parseArgs({
  options: {rounds: {type: 'string', default: '5'}, seconds: {type: 'string', default: '12'}, connections: {type: 'string', default: '16'}},
})
const ROUNDS = Number(options.rounds)
const SECONDS = Number(options.seconds)
const CONNECTIONS = Number(options.connections)
const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))
const HOST_ENV = {EDGEWORKERS_HOST__SHARDS: '1', EDGEWORKERS_HOST__AWAIT_KIT_CONFIRMATION: 'true'}
const root = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-hosts-'))

interface Kit {
  dir: string
  hosts: Array<ServedHost & {dataDir: string}>
  script: string
}

async function cli(kit: Kit | string, ...args: string[]): Promise<string> {
  const dir = typeof kit === 'string' ? kit : kit.dir
  const result = await runCli([...args, '--data-dir', dir])
  if (result.code !== 0) throw new Error(`${args.join(' ')} exited ${result.code}: ${result.stderr}`)
  return result.stdout
}

const project = (body: string, manifest: Record<string, unknown> = {}) => textProjectIn(root, body, manifest)

async function startKit(name: string, hostCount: number): Promise<Kit> {
  const dir = path.join(root, name)
  const hosts = await Promise.all(
    Array.from({length: hostCount}, async (_, index) => {
      const dataDir = path.join(root, `${name}-host-${index}`)
      return {...(await serveHost(BIN, dataDir, {env: HOST_ENV})), dataDir}
    }),
  )
  await cli(dir, 'db', 'migrate')
  for (const [index, host] of hosts.entries())
    await cli(dir, 'host', 'pair', host.adminUrl, '--code', await pairingCodeOf(BIN, host.dataDir), ...(index ? ['--add'] : []))
  await cli(dir, 'company', 'create', 'Bench', '--id', 'bench')
  await cli(dir, 'department', 'create', 'bench', 'Load', '--id', 'load')
  const deployed = JSON.parse(await cli(dir, 'deploy', project('round 0'), '--department', 'load', '--json')) as {url: string}
  await cli(dir, 'reconcile')
  return {dir, hosts, script: new URL(deployed.url).pathname.split('/')[1]!}
}

/** `deploy` from its start until every host of the kit answers `body`. */
async function deployReach(kit: Kit, body: string): Promise<number> {
  const started = performance.now()
  await cli(kit, 'deploy', project(body), '--department', 'load')
  for (const host of kit.hosts) {
    while ((await (await request(`${host.publicUrl}/${kit.script}/`)).body.text()) !== body) {}
  }
  return performance.now() - started
}

/** HAProxy in front of the kit, on the configuration `lb config --haproxy` writes; resolves once all its hosts are UP. */
async function startLoadBalancer(kit: Kit): Promise<RunningHaproxy> {
  const port = await freePort()
  const {text} = JSON.parse(await cli(kit, 'lb', 'config', '--haproxy', '--bind', `127.0.0.1:${port}`, '--check-interval-ms', '200', '--json')) as {
    text: string
  }
  const lb = await startHaproxy(text, `http://127.0.0.1:${port}`, root)
  await lb.waitFor((states) => [...states.values()].filter((state) => state === 'UP').length === kit.hosts.length, 'every host UP', 120_000)
  return lb
}

interface KillRound {
  requests: number
  failed: {before: number; marking: number; down: number}
  rpsBefore: number
  rpsAfter: number
  markDownMs: number
}

async function killRound(kit: Kit, lb: RunningHaproxy, victimIndex: number, body: string): Promise<KillRound> {
  const url = `${lb.url}/${kit.script}/`
  const dispatcher = new Agent({connections: CONNECTIONS})
  const counts = {before: {ok: 0, failed: 0}, marking: {ok: 0, failed: 0}, down: {ok: 0, failed: 0}}
  let phase: keyof typeof counts = 'before'
  const end = Date.now() + SECONDS * 1000
  const client = async () => {
    while (Date.now() < end) {
      const at = phase
      const good = await request(url, {dispatcher}).then(
        async (response) => response.statusCode === 200 && (await response.body.text()) === body,
        () => false,
      )
      counts[at][good ? 'ok' : 'failed']++
    }
  }
  const started = Date.now()
  const clients = Array.from({length: CONNECTIONS}, client)
  await new Promise((resolve) => setTimeout(resolve, (SECONDS * 1000) / 3))
  const killedAt = Date.now()
  const victim = kit.hosts[victimIndex]!
  const victimServer = `h-${hostScopes[victimIndex]!.replace(/^onprem:/, '')}`
  phase = 'marking'
  victim.child.kill('SIGKILL')
  await lb.waitFor((states) => states.get(victimServer) === 'DOWN', 'the killed host DOWN', 120_000)
  const markDownMs = Date.now() - killedAt
  phase = 'down'
  await Promise.all(clients)
  const ended = Date.now()
  await dispatcher.close()
  // Back for the next round: started again, confirmed current by a pass, and marked UP.
  // On its own addresses again: the balancer and the kit know it there.
  const env = {...HOST_ENV, EDGEWORKERS_HOST__LISTEN: new URL(victim.publicUrl).host, EDGEWORKERS_HOST__ADMIN_LISTEN: new URL(victim.adminUrl).host}
  kit.hosts[victimIndex] = {...(await serveHost(BIN, victim.dataDir, {env})), dataDir: victim.dataDir}
  await cli(kit, 'reconcile')
  await lb.waitFor((states) => states.get(victimServer) === 'UP', 'the restarted host UP', 120_000)
  const total = (phaseCounts: {ok: number; failed: number}) => phaseCounts.ok + phaseCounts.failed
  return {
    requests: total(counts.before) + total(counts.marking) + total(counts.down),
    failed: {before: counts.before.failed, marking: counts.marking.failed, down: counts.down.failed},
    rpsBefore: total(counts.before) / ((killedAt - started) / 1000),
    rpsAfter: (total(counts.marking) + total(counts.down)) / ((ended - killedAt) / 1000),
    markDownMs,
  }
}

/** CONNECTIONS clients GET `url` back to back for `seconds`: requests/s and the median latency of those answering `body`. */
async function throughput(url: string, body: string, seconds: number): Promise<{rps: number; p50Ms: number; failed: number}> {
  const dispatcher = new Agent({connections: CONNECTIONS})
  const latencies: number[] = []
  let failed = 0
  const end = Date.now() + seconds * 1000
  const client = async () => {
    while (Date.now() < end) {
      const started = performance.now()
      const good = await request(url, {dispatcher}).then(
        async (response) => response.statusCode === 200 && (await response.body.text()) === body,
        () => false,
      )
      if (good) latencies.push(performance.now() - started)
      else failed++
    }
  }
  await Promise.all(Array.from({length: CONNECTIONS}, client))
  await dispatcher.close()
  return {rps: latencies.length / seconds, p50Ms: median(latencies), failed}
}

const kits: Kit[] = []
let haproxy: RunningHaproxy | undefined
let hostScopes: string[] = []
try {
  log(`starting a 1-host and a 3-host kit (${machineLoad()})`)
  const one = await startKit('one', 1)
  const three = await startKit('three', 3)
  kits.push(one, three)
  const reach: {one: number[]; three: number[]} = {one: [], three: []}
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, kit] of round % 2
      ? ([
          ['one', one],
          ['three', three],
        ] as const)
      : ([
          ['three', three],
          ['one', one],
        ] as const)) {
      reach[name].push(await deployReach(kit, `round ${round}`))
    }
    log(`deploy reach round ${round}: 1 host ${reach.one.at(-1)!.toFixed(0)} ms, 3 hosts ${reach.three.at(-1)!.toFixed(0)} ms`)
  }
  log('starting HAProxy in front of the 3-host kit')
  hostScopes = (JSON.parse(await cli(three, 'host', 'list', '--json')) as {hosts: Array<{host: string}>}).hosts.map((host) => host.host)
  const lb = await startLoadBalancer(three)
  haproxy = lb
  log(`HAProxy answers at ${lb.url}`)
  const rounds: KillRound[] = []
  for (let round = 1; round <= ROUNDS; round++) {
    rounds.push(await killRound(three, lb, round % 3, `round ${ROUNDS}`))
    log(`kill round ${round}: ${JSON.stringify(rounds.at(-1))}`)
  }
  log('placement: the same Worker with an owner host (a cron trigger) and without one')
  await cli(three, 'department', 'create', 'bench', 'Owned', '--id', 'owned')
  const owned = new URL(
    (JSON.parse(await cli(three, 'deploy', project('owned', {crons: ['0 0 1 1 *']}), '--department', 'owned', '--json')) as {url: string}).url,
  ).pathname.split('/')[1]!
  await cli(three, 'reconcile')
  await lb.stop() // the configuration names each owner: written again after the deploy
  const routing = await startLoadBalancer(three)
  haproxy = routing
  const placement: Array<{owned: Awaited<ReturnType<typeof throughput>>; everywhere: Awaited<ReturnType<typeof throughput>>}> = []
  for (let round = 1; round <= ROUNDS; round++) {
    const measure = (which: 'owned' | 'everywhere') =>
      which === 'owned'
        ? throughput(`${routing.url}/${owned}/`, 'owned', SECONDS / 2)
        : throughput(`${routing.url}/${three.script}/`, `round ${ROUNDS}`, SECONDS / 2)
    const [first, second] = round % 2 ? (['owned', 'everywhere'] as const) : (['everywhere', 'owned'] as const)
    const results = {[first]: await measure(first), [second]: await measure(second)} as (typeof placement)[number]
    placement.push(results)
    log(`placement round ${round}: ${JSON.stringify(results)}`)
  }
  const requests = rounds.reduce((sum, round) => sum + round.requests, 0)
  const failed = rounds.reduce((sum, round) => sum + round.failed.before + round.failed.marking + round.failed.down, 0)
  const afterDown = rounds.reduce((sum, round) => sum + round.failed.down, 0)
  const oneMs = median(reach.one)
  const threeMs = median(reach.three)
  console.log(`| figure | value |\n|---|---|`)
  console.log(`| deploy → served on every host, 1-host kit (baseline), median of ${ROUNDS} | ${oneMs.toFixed(0)} ms |`)
  console.log(`| deploy → served on every host, 3-host kit, median of ${ROUNDS} | ${threeMs.toFixed(0)} ms (${(threeMs / oneMs).toFixed(2)}×) |`)
  console.log(
    `| kill -9 of 1 of 3 hosts under load through HAProxy, ${ROUNDS} rounds × ${SECONDS} s, ${CONNECTIONS} connections | ${failed} of ${requests} requests failed (${((failed / requests) * 100).toFixed(3)} %), ${afterDown} after HAProxy marked it DOWN |`,
  )
  console.log(`| kill → HAProxy marks the host DOWN (check every 200 ms, fall 2), median | ${median(rounds.map((round) => round.markDownMs)).toFixed(0)} ms |`)
  console.log(
    `| throughput after the kill / before it (same round), median | ${median(rounds.map((round) => round.rpsAfter / round.rpsBefore)).toFixed(2)} (before: ${median(rounds.map((round) => round.rpsBefore)).toFixed(0)} req/s) |`,
  )
  console.log(
    `| a Worker with an owner (HAProxy routes it to that host) ÷ the same Worker on every host (round robin), through HAProxy, median of ${ROUNDS} × ${SECONDS / 2} s | req/s ${median(placement.map((round) => round.owned.rps / round.everywhere.rps)).toFixed(2)}×, p50 ${median(placement.map((round) => round.owned.p50Ms / round.everywhere.p50Ms)).toFixed(2)}× (${median(placement.map((round) => round.owned.rps)).toFixed(0)} / ${median(placement.map((round) => round.everywhere.rps)).toFixed(0)} req/s); failed ${placement.reduce((sum, round) => sum + round.owned.failed + round.everywhere.failed, 0)} |`,
  )
  console.log(`\nload: ${machineLoad()}`)
} finally {
  await haproxy?.stop()
  for (const kit of kits) for (const host of kit.hosts) host.child.kill('SIGKILL')
  rmSync(root, {recursive: true, force: true})
}
