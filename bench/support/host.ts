// Edge hosts for benchmarks: startBenchHost() runs one in-process (the library behind
// `edgeworkers host serve`) with real workerd shards, on free loopback ports, in a fresh temp data
// dir; pairHost() pairs with a host's one-time code; HostClient speaks the signed management API
// the way the kit's provider does. Always stop hosts: each one runs workerd processes.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import pino from 'pino'
import {request} from 'undici'
import {startHost, type RunningHost} from '../../src/edge-host/host.js'
import type {HostSettings} from '../../src/edge-host/services/host-service.js'
import {READINESS_WAIT_MAX_MS, type UploadScript} from '../../src/protocol/management-api.js'
import {signRequest} from '../../src/protocol/signing.js'
import {paths} from './paths.js'

export interface BenchHostOptions {
  /** `[host]` settings over the benchmark defaults (2 shards, loopback listeners, short timeouts). */
  settings?: Partial<HostSettings>
  maxFenceTtlSeconds?: number
  /** Receives every host log entry at info and above (e.g. to count `script uploaded`). */
  onLog?: (entry: Record<string, unknown>) => void
}

export interface BenchHost {
  readonly host: RunningHost
  readonly publicUrl: string
  readonly adminUrl: string
  readonly dataDir: string
  /** The one-time code the host issued (pair with it once). */
  readonly pairingCode: string | null
  /** A management client signed with `secret`. */
  client(secret: string): HostClient
  /** Stops the host and removes its data dir. */
  stop(): Promise<void>
}

/** What the benchmarks measured with (a coalescing window short enough to show the swap itself). */
const BENCH_DEFAULTS: Partial<HostSettings> = {
  listen: '127.0.0.1:0',
  admin_listen: '127.0.0.1:0',
  shards: 2,
  coalesce_window_ms: 20,
  drain_timeout_ms: 5_000,
  request_hold_timeout_ms: 20_000,
  start_timeout_ms: 30_000,
}

export async function startBenchHost(options: BenchHostOptions = {}): Promise<BenchHost> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-host-'))
  const {onLog} = options
  const logger = onLog ? pino({level: 'info'}, {write: (line: string) => onLog(JSON.parse(line) as Record<string, unknown>)}) : pino({level: 'silent'})
  let host: RunningHost
  try {
    host = await startHost({dataDir, settings: {...BENCH_DEFAULTS, ...options.settings}, maxFenceTtlSeconds: options.maxFenceTtlSeconds, logger})
  } catch (error) {
    rmSync(dataDir, {recursive: true, force: true})
    throw error
  }
  return {
    host,
    publicUrl: host.publicUrl,
    adminUrl: host.adminUrl,
    dataDir,
    pairingCode: host.issuedPairingCode,
    client: (secret) => new HostClient(host.adminUrl, secret),
    async stop() {
      await host.stop()
      rmSync(dataDir, {recursive: true, force: true})
    },
  }
}

/** Pairs with the host at `adminUrl` by its one-time code; the shared secret. */
export async function pairHost(adminUrl: string, code: string): Promise<string> {
  const response = await request(`${adminUrl}${paths.pair}`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({code})})
  const body = (await response.body.json()) as {secret?: string; code?: string}
  if (response.statusCode !== 200 || !body.secret) throw new Error(`pairing failed: ${response.statusCode} ${body.code}`)
  return body.secret
}

export interface HostResponse {
  status: number
  /** Parsed JSON when the answer is JSON, else the text. */
  body: any
  text: string
}

/** A signed management API client; mirrors what the provider sends. */
export class HostClient {
  constructor(
    private readonly adminUrl: string,
    readonly secret: string,
  ) {}

  async call(method: string, target: string, body?: unknown): Promise<HostResponse> {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const headers = {
      ...(payload === undefined ? {} : {'content-type': 'application/json'}),
      ...signRequest({secret: this.secret, method, target, body: payload}),
    }
    const response = await request(`${this.adminUrl}${target}`, {method: method as 'GET', headers, body: payload})
    const text = await response.body.text()
    const isJson = String(response.headers['content-type'] ?? '').startsWith('application/json')
    return {status: response.statusCode, body: isJson ? JSON.parse(text) : text, text}
  }

  /** Uploads the script and waits until that release serves (the probe waits for the swap, as the engine's readiness gate does). */
  async deploy(name: string, upload: UploadScript): Promise<void> {
    const uploaded = await this.call('PUT', paths.script(name), upload)
    if (uploaded.status !== 200) throw new Error(`upload of ${name} answered ${uploaded.status}: ${uploaded.text}`)
    for (;;) {
      const probe = await this.call('GET', paths.readinessProbe(name, upload.releaseGeneration, READINESS_WAIT_MAX_MS))
      if (probe.status === 200) return
      if (probe.status !== 409) throw new Error(`${name}@${upload.releaseGeneration} did not go live: ${probe.status} ${probe.text}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
}
