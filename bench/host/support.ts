// What the parts of the edge host benchmark share: the Workers they deploy, a host started as the
// benchmark runs it (paired, with a client), bare workerd processes configured as the host would run
// the same scripts, the load generator (./load.ts, its own process), and readings of the host's
// metrics and of /proc.
import {spawn} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdirSync, readdirSync, readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import pino from 'pino'
import {startHost, type RunningHost} from '../../src/edge-host/host.js'
import type {UploadScript} from '../../src/protocol/management-api.js'
import {renderValidationConfig} from '../../src/workerd/config.js'
import type {RunnableScript} from '../../src/workerd/script.js'
import {WorkerdProcess} from '../../src/workerd/process.js'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {HostClient, pairHost} from '../support/host.js'
import {CONNECTIONS, COUNTER, workDir} from './options.js'

const LOAD = fileURLToPath(new URL('./load.ts', import.meta.url))

export interface LoadResult {
  requests: number
  seconds: number
  rps: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  failures: number
  slow: number
  /** The load generator's own CPU time per request, µs. */
  loadUs: number
}

export type SwapMode = 'hold' | 'overlap' | 'load'

/** The script whose redeploys are timed: plain in overlap and load mode, the counter (Durable Objects) in hold mode. */
export function timedScript(mode: SwapMode, round: number): UploadScript {
  if (mode !== 'hold') return moduleUpload(`${variant(round)}// swap ${round} ${Date.now()}\n`)
  const source = `${readFileSync(COUNTER, 'utf8')}// swap ${round} ${Date.now()}\n`
  return moduleUpload(source, [{type: 'durable_object_namespace', name: 'COUNTER', className: 'Counter'}])
}

/** A distinct small Worker per index, so every script is its own code. */
export const variant = (index: number) => `export default { fetch() { return new Response('variant ${index}') } }\n`

/**
 * A host as the benchmark runs it (one shard unless told, the other settings its defaults), paired;
 * a restart on the same data dir is paired already and signs with the `secret` it was given.
 */
export async function startMeasuredHost(
  dir: string,
  settings: {shards?: number; code_loading?: 'loader' | 'restart'} = {},
  secret?: string,
): Promise<{host: RunningHost; client: HostClient}> {
  const host = await startHost({
    dataDir: dir,
    settings: {listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', shards: 1, coalesce_window_ms: 20, ...settings},
    logger: pino({level: 'silent'}),
  })
  const code = host.issuedPairingCode
  const key = code === null ? secret : await pairHost(host.adminUrl, code)
  if (key === undefined) throw new Error(`the host in ${dir} is paired already: pass its secret`)
  return {host, client: new HostClient(host.adminUrl, key)}
}

/** A one-module Worker as the host runs it, its module written under `dir` by its SHA-256. */
export function benchScript(name: string, source: string, dir: string): RunnableScript {
  const sha256 = createHash('sha256').update(source).digest('hex')
  writeFileSync(path.join(dir, sha256), source)
  return {
    name,
    releaseGeneration: 'bench',
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    compatibilityFlags: [],
    modules: [{name: 'index.js', type: 'esModule', sha256, size: source.length}],
    bindings: [],
    crons: [],
    queueConsumers: [],
    secrets: [],
    serviceAccounts: [],
    runtimeConfig: [],
    operationSettingsJson: null,
  }
}

/** Scripts on one bare workerd, configured as the host would run them, each on its own loopback port. */
export async function startBareWorkerdWith(sources: Array<{name: string; source: string}>, label: string): Promise<{process: WorkerdProcess}> {
  const dir = path.join(workDir, label)
  mkdirSync(dir, {recursive: true})
  const scripts = sources.map(({name, source}) => benchScript(name, source, dir))
  const config = renderValidationConfig(scripts, {
    modulePath: (digest) => digest,
    egressAllow: ['public'],
    serviceBindingAddress: 'unix:/nonexistent',
    socketAddress: () => '127.0.0.1:0',
  })
  writeFileSync(path.join(dir, 'config.capnp'), config.text)
  const outcome = await WorkerdProcess.start({configPath: path.join(dir, 'config.capnp'), sockets: config.sockets, cwd: dir, startTimeoutMs: 600_000})
  if (!outcome.ok) throw new Error(outcome.error)
  return {process: outcome.process}
}

/** Closed-loop load on `url`; with `rate`, an open loop of that many requests a second (see ./load.ts). */
export async function load(url: string, seconds: number, rate?: number): Promise<LoadResult> {
  return startLoad(url, seconds, Infinity, rate).result
}

/** The load generator on `url` for up to `seconds`; stop() ends it early. Requests over `slowMs` count as slow. */
export function startLoad(url: string, seconds: number, slowMs = Infinity, rate?: number): {result: Promise<LoadResult>; stop(): void} {
  const args = [LOAD, url, String(CONNECTIONS), String(seconds), '', String(slowMs), ...(rate === undefined ? [] : [String(rate)])]
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {stdio: ['ignore', 'pipe', 'inherit']})
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const result = new Promise<number | null>((resolve) => child.once('exit', resolve)).then((code) => {
    if (code !== 0) throw new Error(`load generator exited ${code}`)
    return JSON.parse(output) as LoadResult
  })
  return {result, stop: () => void child.kill('SIGTERM')}
}

/** Sum and count of the host's deploy swap-time histogram for one mode. */
export async function swapHistogram(host: RunningHost, mode: SwapMode): Promise<{sum: number; count: number}> {
  const text = await (await fetch(`${host.adminUrl}/metrics`)).text()
  const value = (name: string) =>
    Number(new RegExp(`^edgeworkers_host_shard_swap_seconds_${name}\\{reason="deploy",mode="${mode}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0)
  return {sum: value('sum'), count: value('count')}
}

/** What replaced a shard's process so far, if anything did (a start is always there): the watchdog, a recycle, a crash. */
export async function restartsOf(host: RunningHost): Promise<string[]> {
  const metrics = await (await fetch(`${host.adminUrl}/metrics`)).text()
  return metrics
    .split('\n')
    .filter((line) => /^edgeworkers_host_(shard_restarts_total|worker_incidents_total)\{/.test(line) && !line.includes('reason="start"'))
}

/** Deploys variants `from`…`to - 1` together (their restarts coalesce) and waits until all serve. */
export async function deployMany(client: HostClient, from: number, to: number): Promise<void> {
  const batch = Array.from({length: to - from}, (_, offset) => ({name: scriptNameFor(`bench/${from + offset}`), script: moduleUpload(variant(from + offset))}))
  await Promise.all(batch.map(({name, script}) => client.deploy(name, script)))
}

export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) / 1024
}

/** The pids of the running workerd of every shard (recorded as runtime/pids/shard-<i>.<pid>; one each outside swaps). */
export function shardPids(host: RunningHost): number[] {
  return readdirSync(path.join(host.dataDir, 'runtime', 'pids'))
    .filter((file) => file.startsWith('shard-'))
    .map((file) => Number(file.slice(file.lastIndexOf('.') + 1)))
}

export function shardPid(host: RunningHost): number {
  const pids = shardPids(host)
  if (pids.length !== 1) throw new Error(`expected one running workerd, found ${pids.length}`)
  return pids[0]!
}

const CLOCK_TICKS_PER_SECOND = 100

/** CPU time (user + system) a process has used so far, in ms; 'self' is this process. */
export function cpuMs(pid: number | 'self'): number {
  if (pid === 'self') {
    const usage = process.cpuUsage()
    return (usage.user + usage.system) / 1000
  }
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  // utime and stime are fields 14 and 15 of /proc/<pid>/stat, 12 and 13 after the ") " split.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND
}
