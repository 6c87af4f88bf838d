// `edgeworkers tail`: one Worker's events, live, from the paired edge host. The stream follows the
// script name, so a redeploy keeps it (the new release's events arrive on the same stream); when the
// stream is cut (the host restarts, the network drops) it reconnects until the caller aborts.
import {KitError} from '../errors.js'
import {isErrorEvent, isTailEvent, type TailEvent, type TailLine} from '../protocol/tail.js'
import {ProviderError} from '../provider/types.js'
import type {Engine} from './context.js'
import {requireProvider} from './provider.js'
import {findWorker} from './workers.js'

export interface TailFilters {
  /** ok: events that are not errors; error: exceptions, limits and 5xx answers (see isErrorEvent). */
  status?: 'ok' | 'error'
  /** Upper-case HTTP methods; empty = all. */
  methods: string[]
  /** Case-insensitive text looked for in the path, console lines and exceptions. */
  search?: string
  /** The share of events kept, 0 < rate ≤ 1 (a random sample). */
  samplingRate: number
}

export type TailNotice = {kind: 'tailing'; script: string} | {kind: 'reconnecting'; reason: string}

/** Wait between reconnect attempts. */
const RECONNECT_DELAY_MS = 1_000

export function matchesTailFilters(event: TailEvent, filters: TailFilters, random: () => number = Math.random): boolean {
  if (filters.status && (filters.status === 'error') !== isErrorEvent(event)) return false
  if (filters.methods.length > 0 && !filters.methods.includes(event.method.toUpperCase())) return false
  if (filters.search) {
    const needle = filters.search.toLowerCase()
    const texts = [
      event.path,
      ...event.logs.map((line) => line.message),
      ...event.exceptions.flatMap((exception) => [exception.name, exception.message, exception.stack]),
    ]
    if (!texts.some((text) => text.toLowerCase().includes(needle))) return false
  }
  return filters.samplingRate >= 1 || random() < filters.samplingRate
}

/**
 * The events of the Worker `handle` names (department id, Worker id or script name) that pass
 * `filters`, and the host's notices of events it sampled out under volume, until `signal` aborts.
 * Refuses an unknown or retired Worker, and a host that does not have the script (never deployed),
 * before streaming.
 */
export async function* tailWorker(
  engine: Engine,
  handle: string,
  options: {filters: TailFilters; signal: AbortSignal; onNotice?(notice: TailNotice): void},
): AsyncIterable<TailLine> {
  const worker = await findWorker(engine, handle)
  if (worker.retired_at !== null) throw new KitError('conflict', `Worker ${handle} is retired: it serves nothing, so it has no events`)
  const {provider} = await requireProvider(engine, `tail ${handle}`)
  const {signal, filters} = options
  options.onNotice?.({kind: 'tailing', script: worker.script_name})
  // A host unreachable at the start is an error; once a stream was open, the host is restarting.
  let connected = false
  while (!signal.aborted) {
    try {
      for await (const line of provider.tail(worker.script_name, signal)) {
        if (!isTailEvent(line) || matchesTailFilters(line, filters)) yield line
      }
      return // aborted
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error
      if (error.code === 'edge_host_script_not_found')
        throw new KitError('not_found', `Worker ${handle} (${worker.script_name}) is not on the edge host: it was never deployed`)
      if (error.kind === 'terminal') throw new KitError('host_error', error.message, error.code)
      if (!connected && error.code === 'edge_host_unreachable') throw new KitError('host_unreachable', error.message, error.code)
      options.onNotice?.({kind: 'reconnecting', reason: error.message})
      await delay(RECONNECT_DELAY_MS, signal)
    }
    connected = true
  }
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, {once: true})
  })
}
