// Real edge hosts for tests: startTestHost() runs one in-process (the library behind
// `edgeworkers host serve`) with real workerd shards, on free loopback ports, in a fresh temp data
// dir. HostClient speaks the signed management API the way the kit's provider does.
//
//   const host = await startTestHost()
//   const {secret} = await host.pair()
//   const client = host.client()                         // signed with the pairing secret
//   await client.deploy(scriptNameFor('x'), fixtureUpload('hello'))   // upload + wait until live
//   const response = await fetch(`${host.publicUrl}/${name}/`)
//   await host.restart()                                 // same data dir, same ports (and settings)
//   await host.stop()                                    // also removes the data dir
//
// Always stop hosts (afterEach/afterAll): each one runs workerd processes.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import pino from 'pino'
import {request} from 'undici'
import {startHost, type RunningHost} from '../../src/edge-host/host.js'
import type {HostSettings} from '../../src/edge-host/services/host-service.js'
import {READINESS_WAIT_MAX_MS, type ScriptDetails, type UploadScript} from '../../src/protocol/management-api.js'
import {paths} from './paths.js'
import {signRequest} from '../../src/protocol/signing.js'

export interface TestHostOptions {
  /** `[host]` settings over the test defaults (2 shards, 127.0.0.1:0 listeners, short timeouts). */
  settings?: Partial<HostSettings>
  maxFenceTtlSeconds?: number
  /** Reuse a data dir (it is then not removed on stop). */
  dataDir?: string
  /** Receives every host log entry at info and above (e.g. to count `script uploaded`). */
  onLog?: (entry: Record<string, unknown>) => void
  /** The clock cron triggers follow (see HostOptions.cronClock). */
  cronClock?: () => number
}

export interface Pairing {
  secret: string
  fingerprint: string
  scope: string
  hostPublicKey: string
}

export interface TestHost {
  readonly publicUrl: string
  readonly adminUrl: string
  readonly dataDir: string
  /** The one-time code the first start issued (null once this helper paired with it). */
  readonly pairingCode: string | null
  /** The running host (replaced by restart()). */
  readonly host: RunningHost
  /** Pairs once with the issued code; later calls return the same pairing. */
  pair(): Promise<Pairing>
  /** A management client signed with the pairing secret (pair() first) or with `secret`. */
  client(secret?: string): HostClient
  /**
   * Stops and starts the host again on the same data dir and ports, optionally with other settings;
   * `whileStopped` runs in between (e.g. to age data on disk as if the clock had moved on).
   */
  restart(settings?: Partial<HostSettings>, whileStopped?: () => void | Promise<void>): Promise<void>
  stop(): Promise<void>
}

const TEST_DEFAULTS: Partial<HostSettings> = {
  listen: '127.0.0.1:0',
  admin_listen: '127.0.0.1:0',
  shards: 2,
  coalesce_window_ms: 20,
  drain_timeout_ms: 5_000,
  request_hold_timeout_ms: 20_000,
  start_timeout_ms: 30_000,
  // Workers loaded into a running process stay in its loader: tests that count swaps or processes see only theirs.
  loader_settle_seconds: 0,
  // TEST_HOST_FRONT=haproxy runs every test host behind the HAProxy front door (host.front).
  ...(process.env.TEST_HOST_FRONT === 'haproxy' ? {front: 'haproxy' as const} : {}),
}

/** Host logs are silent in tests unless TEST_HOST_LOG=1 (not EDGEWORKERS_*: the CLI refuses settings it does not know) or the test asked for them. */
function testLogger(onLog?: (entry: Record<string, unknown>) => void) {
  if (!onLog) return pino({level: process.env.TEST_HOST_LOG ? 'info' : 'silent'})
  return pino({level: 'info'}, {write: (line: string) => onLog(JSON.parse(line) as Record<string, unknown>)})
}

export async function startTestHost(options: TestHostOptions = {}): Promise<TestHost> {
  const ownsDataDir = options.dataDir === undefined
  const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'edgeworkers-host-'))
  const settings = {...TEST_DEFAULTS, ...options.settings}
  const start = (overrides: Partial<HostSettings> = {}) =>
    startHost({
      dataDir,
      settings: {...settings, ...overrides},
      maxFenceTtlSeconds: options.maxFenceTtlSeconds,
      logger: testLogger(options.onLog),
      cronClock: options.cronClock,
    })

  let host: RunningHost
  try {
    host = await start()
  } catch (error) {
    if (ownsDataDir) rmSync(dataDir, {recursive: true, force: true})
    throw error
  }
  let pairingCode = host.issuedPairingCode
  let pairing: Pairing | null = null
  let stopped = false

  return {
    get publicUrl() {
      return host.publicUrl
    },
    get adminUrl() {
      return host.adminUrl
    },
    get host() {
      return host
    },
    get pairingCode() {
      return pairingCode
    },
    dataDir,
    async pair() {
      if (pairing) return pairing
      if (pairingCode === null) throw new Error('this host was paired before the helper saw its code')
      const response = await request(`${host.adminUrl}${paths.pair}`, {
        method: 'POST',
        headers: {'content-type': 'application/json'},
        body: JSON.stringify({code: pairingCode}),
      })
      const body = (await response.body.json()) as Pairing & {code?: string}
      if (response.statusCode !== 200) throw new Error(`pairing failed: ${response.statusCode} ${body.code}`)
      pairing = {secret: body.secret, fingerprint: body.fingerprint, scope: body.scope, hostPublicKey: body.hostPublicKey}
      pairingCode = null
      return pairing
    },
    client(secret) {
      const key = secret ?? pairing?.secret
      if (!key) throw new Error('pair() first, or pass a secret')
      return new HostClient(() => host.adminUrl, key)
    },
    async restart(overrides = {}, whileStopped) {
      await host.stop()
      await whileStopped?.()
      // Same ports: what a restarted host serves must be reachable where it was.
      host = await start({listen: `127.0.0.1:${host.listen.port}`, admin_listen: `127.0.0.1:${host.adminListen.port}`, ...overrides})
    },
    async stop() {
      if (stopped) return
      stopped = true
      await host.stop()
      if (ownsDataDir) rmSync(dataDir, {recursive: true, force: true})
    },
  }
}

export interface HostResponse<T = unknown> {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** Parsed JSON when the answer is JSON, else the text. */
  body: T
  text: string
}

export interface CallOptions {
  /** Send these bytes instead of JSON.stringify(body). */
  rawBody?: string | Buffer
  /** Sign these bytes instead of the ones sent (to test tampering). */
  signedBody?: string | Buffer
  /** false = send no signature headers. */
  sign?: boolean
  /** Clock for the signature (to test stale timestamps). */
  nowMs?: number
  nonce?: string
  headers?: Record<string, string>
}

/** The signed management API client tests use; mirrors what the provider sends. */
export class HostClient {
  constructor(
    private readonly adminUrl: () => string,
    readonly secret: string,
  ) {}

  async call<T = any>(method: string, target: string, body?: unknown, options: CallOptions = {}): Promise<HostResponse<T>> {
    const payload = options.rawBody ?? (body === undefined ? undefined : JSON.stringify(body))
    const headers: Record<string, string> = {...(payload === undefined ? {} : {'content-type': 'application/json'}), ...options.headers}
    if (options.sign !== false) {
      Object.assign(
        headers,
        signRequest({secret: this.secret, method, target, body: options.signedBody ?? payload, nowMs: options.nowMs, nonce: options.nonce}),
      )
    }
    const response = await request(`${this.adminUrl()}${target}`, {method: method as 'GET', headers, body: payload})
    const text = await response.body.text()
    const isJson = String(response.headers['content-type'] ?? '').startsWith('application/json')
    return {status: response.statusCode, headers: response.headers, body: (isJson ? JSON.parse(text) : text) as T, text}
  }

  /** PUT the script; throws unless the host accepted it. */
  async upload(name: string, upload: UploadScript): Promise<ScriptDetails> {
    const response = await this.call<ScriptDetails>('PUT', paths.script(name), upload)
    if (response.status !== 200) throw new Error(`upload of ${name} answered ${response.status}: ${response.text}`)
    return response.body
  }

  /** Probes readiness (the host waits for the swap) until that release generation is live. */
  async waitLive(name: string, releaseGeneration: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const waitMs = Math.max(0, Math.min(READINESS_WAIT_MAX_MS, deadline - Date.now()))
      const response = await this.call('GET', paths.readinessProbe(name, releaseGeneration, waitMs))
      if (response.status === 200) return
      if (response.status !== 409 || Date.now() > deadline) {
        throw new Error(`${name}@${releaseGeneration} did not go live: ${response.status} ${response.text}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
  }

  /** Upload and wait until the release serves. */
  async deploy(name: string, upload: UploadScript): Promise<ScriptDetails> {
    const details = await this.upload(name, upload)
    await this.waitLive(name, upload.releaseGeneration)
    return details
  }
}
