// The keep-alive connections from the host to one shard process's Unix sockets.
import {Agent, buildConnector, Pool} from 'undici'
import {HEALTH_SOCKET} from '../../workerd/config.js'
import {LOAD_HEADER, LOADER_SOCKET, WARM_HEADER} from '../../workerd/loader-worker.js'

/** Connections per script socket. */
const CONNECTIONS_PER_SOCKET = 64

/**
 * An agent whose origin `http://<socket name>` reaches that socket: one keep-alive pool per script,
 * as with TCP ports, but nothing listens on the network. The loader's socket carries every loaded
 * Worker of the shard: it is not capped at one script's connections, or a slow Worker would queue
 * its neighbours.
 */
export function shardAgent(socketPaths: ReadonlyMap<string, string>): Agent {
  return new Agent({
    keepAliveTimeout: 10_000,
    connect: unixConnector(socketPaths),
    factory: (origin, options) =>
      new Pool(origin, {...options, connections: new URL(String(origin)).hostname === LOADER_SOCKET ? null : CONNECTIONS_PER_SOCKET}),
  })
}

/** Has the shard's loader load `loadId` now (compiling it, running its top level), so its first request does not wait. */
export async function warmLoad(agent: Agent, loadId: string, timeoutMs: number): Promise<void> {
  const response = await agent.request({
    origin: `http://${LOADER_SOCKET}`,
    path: '/',
    method: 'GET',
    headers: {[LOAD_HEADER]: loadId, [WARM_HEADER]: '1'},
    headersTimeout: timeoutMs,
  })
  const text = await response.body.text()
  if (response.statusCode !== 200) throw new Error(`the loader answered ${response.statusCode} for ${loadId}: ${text.slice(0, 500)}`)
}

function unixConnector(socketPaths: ReadonlyMap<string, string>): buildConnector.connector {
  const connectors = new Map<string, buildConnector.connector>()
  return (options, callback) => {
    const socketPath = socketPaths.get(options.hostname)
    if (socketPath === undefined) {
      callback(Object.assign(new Error(`no socket for ${options.hostname}`), {code: 'ECONNREFUSED'}), null)
      return
    }
    let connector = connectors.get(socketPath)
    if (!connector) {
      connector = buildConnector({socketPath})
      connectors.set(socketPath, connector)
    }
    connector(options, callback)
  }
}

/** Asks a process's health socket: the status it answered (any answer shows its thread is free), null if none. */
export async function probeHealth(agent: Agent): Promise<number | null> {
  try {
    const response = await agent.request({origin: `http://${HEALTH_SOCKET}`, path: '/', method: 'GET'})
    await response.body.dump()
    return response.statusCode
  } catch {
    return null
  }
}
