// The host's front door (host.front = "haproxy"): an HAProxy child owns the public listener; the
// Node data plane serves behind it on an internal socket as its default backend. The host pushes
// its fast-path table to HAProxy: each Worker whose answers HAProxy can give identically (the host
// decides which: see fastTargets in ../host.ts) gets a fast backend, a slot whose server is a symlink
// to the Worker's own workerd socket (its retries go to the Node data plane), and a line
// `<script> w<slot>` in the fast map.
// Changes go through HAProxy's runtime API, so a Worker taken off the fast path (retired, locked
// down, quarantined, tailed, its process replaced) is off it once sync() resolves, before the host
// acknowledges the change; a Worker whose socket changed gets a fresh slot, so no kept-alive
// connection to its old process is ever reused. Requests the fast path answered are counted from
// HAProxy's per-server statistics of the slots' Worker servers, by status class, into the host's
// request metrics (the Node data plane counts what it answered itself).
//
// Files under <data dir>/runtime/front/: haproxy.cfg, admin.sock (the runtime API), node.sock (the
// Node data plane), fast.map, slots/<i> (the symlinks).
import {mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import type {Logger} from 'pino'
import {RETRY_SERVER, renderFrontConfig, SLOT_SERVER, slotBackend, type FrontConfig} from './haproxy-config.js'
import {HaproxyProcess} from './haproxy-process.js'
import {parseStats, runtimeCommands} from './runtime-api.js'

/** Fast backends in the configuration: Workers past this many take the Node data plane. */
const SLOTS = 512
/** How often a retiring process's drain asks HAProxy whether requests are still inside it. */
const DRAIN_POLL_MS = 50
/** HAProxy's response counters, by status class. */
const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx', 'other'] as const

export interface FrontOptions {
  dataDir: string
  binary: string
  config: Pick<FrontConfig, 'baseDomain' | 'maxConnections' | 'maxConnectionsPerAddress' | 'headerTimeoutMs' | 'requestTimeoutMs' | 'idleTimeoutMs'>
  /** How long a stop lets the requests inside end. */
  drainTimeoutMs: number
  /** Script → its Worker's own socket, for every Worker the fast path may serve now. */
  fastTargets(): Map<string, string>
  /** Requests the fast path answered for `script`, by status class (`2xx`, …). */
  countRequests(script: string, statusClass: string, count: number): void
  log: Logger
}

interface Assignment {
  slot: number
  target: string
  /** The slot's answers (all status classes) when the script got it: the slot serves one process of one script. */
  answeredBefore: number
}

export class HaproxyFront {
  readonly nodeSocket: string
  private readonly dir: string
  private readonly mapFile: string
  private readonly slotDir: string
  private readonly adminSocket: string
  private haproxy: HaproxyProcess | null = null
  private serving = false
  private readonly assigned = new Map<string, Assignment>()
  /** Slots no Worker holds, the longest free first. */
  private readonly free: number[] = Array.from({length: SLOTS}, (_, index) => index)
  /** Slot → the socket it was given to last (a relink while it leaves does not change it). */
  private readonly given = new Map<number, string>()
  /** Each slot's response counts at the last read. */
  private readonly counted = new Map<number, Record<string, number>>()
  private syncing: Promise<void> = Promise.resolve()
  private queued: Promise<void> | null = null

  constructor(private readonly options: FrontOptions) {
    this.dir = path.join(options.dataDir, 'runtime', 'front')
    this.nodeSocket = path.join(this.dir, 'node.sock')
    this.mapFile = path.join(this.dir, 'fast.map')
    this.slotDir = path.join(this.dir, 'slots')
    this.adminSocket = path.join(this.dir, 'admin.sock')
  }

  get pid(): number | null {
    return this.haproxy?.pid ?? null
  }

  /**
   * Binds the public address here (port 0 picks one) and starts HAProxy on that socket; the host's
   * copy is closed before the event loop could accept on it, so HAProxy alone takes connections.
   */
  async listen(address: {host: string; port: number}): Promise<{host: string; port: number}> {
    // A previous host's links go; node.sock, bound already, stays.
    rmSync(this.slotDir, {recursive: true, force: true})
    mkdirSync(this.slotDir, {recursive: true, mode: 0o700})
    this.writeMap()
    const server = net.createServer()
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(address.port, address.host, () => resolve())
    })
    const bound = {host: address.host, port: (server.address() as net.AddressInfo).port}
    const host = bound.host.includes(':') ? `[${bound.host}]` : bound.host
    const haproxy = new HaproxyProcess(
      {
        binary: this.options.binary,
        configPath: path.join(this.dir, 'haproxy.cfg'),
        adminSocket: this.adminSocket,
        render: (bind) =>
          renderFrontConfig({
            ...this.options.config,
            bind,
            adminSocket: this.adminSocket,
            nodeSocket: this.nodeSocket,
            mapFile: this.mapFile,
            slots: SLOTS,
            slotDir: this.slotDir,
          }),
        beforeRestart: () => {
          this.serving = false
          this.writeMap()
        },
        onServing: () => {
          this.serving = true
          this.counted.clear() // a new process counts from zero
          void this.sync()
        },
        log: this.options.log,
      },
      `${host}:${bound.port}`,
    )
    this.haproxy = haproxy
    const fd = (server as unknown as {_handle: {fd: number}})._handle.fd
    const started = haproxy.start(fd)
    // spawn() above ran synchronously: the child holds its copy of the socket already.
    server.close()
    await started
    return bound
  }

  /**
   * Brings HAProxy's fast map to the host's current table; resolves once HAProxy applied it. A Worker whose socket
   * changed or went has its slot relinked at once, before an old process can stop: the requests HAProxy sends there
   * before the map change is applied reach the new one, or the Node data plane (its retries go there in any case).
   */
  sync(): Promise<void> {
    if (this.serving) {
      // A Worker leaving the fast path (its process died, say): what HAProxy still sends it goes to the Node data plane.
      const desired = this.options.fastTargets()
      for (const [script, {slot, target}] of this.assigned) {
        const now = desired.get(script) ?? this.nodeSocket
        if (now !== target) this.link(slot, now)
      }
    }
    if (this.queued !== null) return this.queued
    const next = this.syncing
      .then(() => {
        this.queued = null
        return this.syncOnce()
      })
      .catch((error: unknown) => this.options.log.error({err: error}, 'front: pushing the fast-path table to haproxy failed'))
    this.queued = next
    this.syncing = next
    return next
  }

  /** Folds the fast path's request counts since the last read into the host's metrics. */
  async readCounters(): Promise<void> {
    if (!this.serving) return
    const stats = parseStats(await runtimeCommands(this.adminSocket, ['show stat -1 4 -1']))
    const owners = new Map([...this.assigned].map(([script, {slot}]) => [slot, script]))
    for (const row of stats) {
      const slot = /^w(\d+)$/.exec(row.pxname ?? '')
      if (!slot || row.svname !== SLOT_SERVER) continue
      const index = Number(slot[1])
      const before = this.counted.get(index) ?? {}
      const now: Record<string, number> = {}
      for (const statusClass of STATUS_CLASSES) {
        now[statusClass] = Number(row[`hrsp_${statusClass}`] || 0)
        const delta = now[statusClass] - (before[statusClass] ?? 0)
        const owner = owners.get(index)
        if (delta > 0 && owner !== undefined) this.options.countRequests(owner, statusClass, delta)
      }
      this.counted.set(index, now)
    }
  }

  /**
   * `script`'s process is about to be killed as a runaway it caused: off the fast path, and its slot out of
   * servers out of service, so that HAProxy does not replay its request (the host never replays the blamed one).
   */
  condemn(script: string): void {
    const assignment = this.assigned.get(script)
    if (!assignment || !this.serving) return
    this.assigned.delete(script)
    this.free.push(assignment.slot)
    const backend = slotBackend(assignment.slot)
    const commands = [`del map ${this.mapFile} ${script}`, ...[SLOT_SERVER, RETRY_SERVER].map((server) => `set server ${backend}/${server} state maint`)]
    void this.api(commands).catch((error: unknown) => this.options.log.error({err: error, script}, 'front: taking a runaway off the fast path failed'))
  }

  /** Of `scripts`, the one whose fast-path request holds a held workerd thread, for the watchdog; null if none is inside. */
  async suspect(scripts: ReadonlySet<string>): Promise<string | null> {
    if (!this.serving) return null
    const owners = new Map([...this.assigned].filter(([script]) => scripts.has(script)).map(([script, {slot}]) => [slotBackend(slot), script]))
    if (owners.size === 0) return null
    const sessions = await runtimeCommands(this.adminSocket, ['show sess']).catch(() => '')
    await this.readCounters()
    // As the Node data plane ranks its own (../runtime/process-requests.ts): a neighbour's request that reached the
    // process just before the thread was held is stuck behind the offender and may be older, so a script whose
    // process never answered it comes first.
    let best: {script: string; rank: number} | null = null
    for (const match of sessions.matchAll(new RegExp(` be=(w\\d+) srv=${SLOT_SERVER} `, 'g'))) {
      const script = owners.get(match[1]!)
      if (script === undefined) continue
      const assignment = this.assigned.get(script)!
      const rank = this.answeredBy(assignment.slot) === assignment.answeredBefore ? 0 : 1
      if (!best || rank < best.rank) best = {script, rank}
    }
    return best?.script ?? null
  }

  /**
   * Resolves once no fast-path request is inside a slot that was given to one of `targets` (a replaced process's
   * sockets), polling HAProxy's per-server sessions; after `timeoutMs` in any case.
   */
  async drained(targets: ReadonlySet<string>, timeoutMs: number): Promise<void> {
    await this.sync() // HAProxy sends nothing more there: a shard that closed its gate is off the fast map
    const slots = new Set([...this.given].filter(([, target]) => targets.has(target)).map(([slot]) => slotBackend(slot)))
    const deadline = Date.now() + timeoutMs
    while (slots.size > 0 && this.serving && Date.now() < deadline) {
      const servers = parseStats(await runtimeCommands(this.adminSocket, ['show stat -1 4 -1']).catch(() => ''))
      if (!servers.some((row) => slots.has(row.pxname ?? '') && row.svname === SLOT_SERVER && Number(row.scur) > 0)) return
      await sleep(DRAIN_POLL_MS)
    }
  }

  /** The slot's answers at the last read of HAProxy's statistics. */
  private answeredBy(slot: number): number {
    return Object.values(this.counted.get(slot) ?? {}).reduce((sum, count) => sum + count, 0)
  }

  /** HAProxy stops accepting and lets the requests inside end, for up to host.drain_timeout_ms. */
  async stop(): Promise<void> {
    this.serving = false
    await this.haproxy?.stop(this.options.drainTimeoutMs)
  }

  private async syncOnce(): Promise<void> {
    if (!this.serving) return // a restart pushes the whole table once it serves
    const desired = this.options.fastTargets()
    const leaving = [...this.assigned].filter(([script, {target}]) => desired.get(script) !== target).map(([script]) => script)
    if (leaving.length > 0) {
      await this.api(leaving.map((script) => `del map ${this.mapFile} ${script}`))
      await this.readCounters() // what the leaving slots answered is still theirs
      for (const script of leaving) {
        const {slot} = this.assigned.get(script)!
        // What HAProxy still sends there (a request that picked the slot before the map change) goes to the Node
        // data plane, which holds it for the shard's next process or answers as the script's state says.
        this.link(slot, this.nodeSocket)
        this.free.push(slot)
        this.assigned.delete(script)
      }
    }
    const joining = [...desired].filter(([script]) => !this.assigned.has(script)).slice(0, this.free.length)
    if (joining.length === 0) return
    await this.readCounters() // where each joining slot's answers start
    const commands: string[] = []
    for (const [script, target] of joining) {
      const slot = this.free.shift()!
      this.link(slot, target)
      this.assigned.set(script, {slot, target, answeredBefore: this.answeredBy(slot)})
      this.given.set(slot, target)
      // Connections kept alive to the slot's previous Worker go before it serves another (and a condemned slot serves again).
      const server = `${slotBackend(slot)}/${SLOT_SERVER}`
      commands.push(
        `set server ${server} state maint`,
        `set server ${server} state ready`,
        `set server ${slotBackend(slot)}/${RETRY_SERVER} state ready`,
        `add map ${this.mapFile} ${script} ${slotBackend(slot)}`,
      )
    }
    await this.api(commands)
  }

  private async api(commands: string[]): Promise<void> {
    const answer = await runtimeCommands(this.adminSocket, commands)
    // Successful commands answer with empty lines; anything else is HAProxy's complaint.
    if (answer.trim() !== '') this.options.log.warn({answer: answer.trim().slice(0, 2000)}, 'front: haproxy runtime API')
  }

  /** Points slot `slot` at `target`, atomically (a new symlink renamed over the old). */
  private link(slot: number, target: string): void {
    const link = path.join(this.slotDir, String(slot))
    rmSync(`${link}.new`, {force: true})
    symlinkSync(target, `${link}.new`)
    renameSync(`${link}.new`, link)
  }

  /** The fast map as a file, for the next HAProxy start. */
  private writeMap(): void {
    const lines = [...this.assigned].map(([script, {slot}]) => `${script} ${slotBackend(slot)}\n`)
    writeFileSync(this.mapFile, lines.join(''), {mode: 0o600})
  }
}
