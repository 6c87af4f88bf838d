// What a shard's running workerd serves of each script, and what a change of the shard's scripts
// asks of it under the loader (see Shard.refresh): new loads into the running process, or a swap.
import {createHash} from 'node:crypto'
import type {RunnableScript} from '../../workerd/script.js'
import {LOADER_SOCKET} from '../../workerd/loader-worker.js'
import {usesDurableObjects} from '../../workerd/config.js'

export interface LoadedScript {
  releaseGeneration: string
  /** The socket serving it: its own, or the loader's. */
  socket: string
  /** Its load id in the loader Worker; null on its own socket. */
  loadId: string | null
  usesDurableObjects: boolean
  /** Nothing of it runs in the process but requests routed to it: its route can go without a swap. */
  requestsOnly: boolean
  /** Of everything the process was given for it (code and env): a change needs a new load or a swap. */
  fingerprint: string
  /** Its traces go to the tail Worker (always so in the loader); else the counting main module counts (../../workerd/worker-counts.ts). */
  traced: boolean
}

/** `requestsOnly`: the script could run in the loader (see LoadedScript.requestsOnly). `traced`: on its own socket, workerd traces it. */
export function loadedEntry(script: RunnableScript, loadId: string | null, requestsOnly: boolean, traced = false): LoadedScript {
  return {
    traced: loadId !== null || traced,
    releaseGeneration: script.releaseGeneration,
    socket: loadId === null ? script.name : LOADER_SOCKET,
    loadId,
    usesDurableObjects: usesDurableObjects(script),
    requestsOnly,
    fingerprint: fingerprintOf(script),
  }
}

/**
 * `swap` when only a new process can serve `scripts` (a script the loader cannot run changed,
 * appeared or went — a Worker with Durable Objects or crons retired would keep running its alarms or
 * crons in this process); otherwise the scripts the loader must load anew (new or changed) and the
 * ones no longer served. A script the process started with on its own socket (see Shard.swap) stays
 * there until it changes.
 */
export function planInPlaceLoad(
  loaded: ReadonlyMap<string, LoadedScript>,
  scripts: RunnableScript[],
  runsInLoader: (script: RunnableScript) => boolean,
): 'swap' | {load: RunnableScript[]; removed: string[]} {
  const load: RunnableScript[] = []
  for (const script of scripts) {
    const entry = loaded.get(script.name)
    const current = entry !== undefined && entry.fingerprint === fingerprintOf(script)
    if (!runsInLoader(script)) {
      if (!current || entry.loadId !== null) return 'swap'
    } else if (!current) load.push(script)
  }
  const wanted = new Set(scripts.map((script) => script.name))
  const removed = [...loaded].filter(([name]) => !wanted.has(name))
  if (removed.some(([, entry]) => !entry.requestsOnly)) return 'swap'
  return {load, removed: removed.map(([name]) => name)}
}

/**
 * What a new process of a shard leaves to its loader Worker (`codeLoading`: null without one). A
 * process started for the host's start, a deploy's swap or a recycle runs every script on its own
 * socket: a request then costs one invocation in workerd, not the loader's and the Worker's; only
 * Workers loaded into it later go through the loader (until the next recycle). One replacing a
 * runaway or a crash (`urgent`) leaves to the loader all it can run, so that the spare process,
 * which has no scripts of its own, can take over at once.
 */
export function loaderAtStart(urgent: boolean, codeLoading: {runsInLoader(script: RunnableScript): boolean} | null): (script: RunnableScript) => boolean {
  return urgent && codeLoading ? (script) => codeLoading.runsInLoader(script) : () => false
}

/**
 * The load ids given in a shard's running process, each standing for the script release it was
 * given for; the replaced process's stay known while it may still finish requests.
 */
export class LoadIds {
  private current = new Map<string, RunnableScript>()
  private previous = new Map<string, RunnableScript>()
  private sequence = 0

  /** A new id for `script`: `<script>:<release generation>:<n>`, never given twice in one host process. */
  register(script: RunnableScript): string {
    const loadId = `${script.name}:${script.releaseGeneration}:${++this.sequence}`
    this.current.set(loadId, script)
    return loadId
  }

  lookup(loadId: string): RunnableScript | undefined {
    return this.current.get(loadId) ?? this.previous.get(loadId)
  }

  newProcess(): void {
    this.previous = this.current
    this.current = new Map()
  }
}

function fingerprintOf(script: RunnableScript): string {
  return createHash('sha256').update(JSON.stringify(script)).digest('base64')
}

/** A settle swap waits while a request older than this is inside: a stream, say, which the swap's drain would end. */
const SETTLE_SPARES_MS = 1_000

/**
 * Whether a settle swap (see Shard) should run: `never` unless it would take Workers out of the
 * loader or drop replaced loads (`staleLoads`) without holding requests (no Durable Objects);
 * `later` while a WebSocket or a long-lived request is open (the swap would cut it).
 */
export function settleDecision(
  loaded: ReadonlyMap<string, LoadedScript>,
  staleLoads: number,
  inside: {suspect(minAgeMs: number): string | null; openTunnels: number},
): 'now' | 'later' | 'never' {
  const entries = [...loaded.values()]
  const worth = (staleLoads > 0 || entries.some((entry) => entry.loadId !== null)) && !entries.some((entry) => entry.usesDurableObjects)
  if (!worth) return 'never'
  return inside.openTunnels === 0 && inside.suspect(SETTLE_SPARES_MS) === null ? 'now' : 'later'
}

/** Some script the process serves keeps Durable Objects: no second process may open their files. */
export function anyUsesDurableObjects(loaded: ReadonlyMap<string, LoadedScript>): boolean {
  return [...loaded.values()].some((entry) => entry.usesDurableObjects)
}

/**
 * Script → the Unix path of its own socket, for a front door that reaches workerd without the
 * shard's gate; none for Workers in the loader. A swap that holds requests (Durable Objects) waits
 * for the front door's requests inside the process too (Shard.drained).
 */
export function ownSocketsOf(loaded: ReadonlyMap<string, LoadedScript>, socketPaths: ReadonlyMap<string, string>): Map<string, string> {
  const own = new Map<string, string>()
  for (const [script, entry] of loaded) if (entry.loadId === null && socketPaths.has(entry.socket)) own.set(script, socketPaths.get(entry.socket)!)
  return own
}
