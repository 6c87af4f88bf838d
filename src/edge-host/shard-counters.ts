// What a serving shard's counting sockets answer (binding operations, per-Worker counts): one GET of
// JSON through the process's agent, read when /metrics is scraped, when `status` asks, and before a
// process is stopped.
import type {Agent} from 'undici'

/** A read waits this long for a process's answer: a scrape must not hang on a busy shard. */
const READ_TIMEOUT_MS = 2_000

/** The JSON the process behind `agent` serves on `socket`; null when it has no such socket, does not answer, or is going. */
export async function readShardCounters(agent: Agent, socket: string): Promise<unknown> {
  try {
    const response = await agent.request({
      origin: `http://${socket}`,
      path: '/',
      method: 'GET',
      headersTimeout: READ_TIMEOUT_MS,
      bodyTimeout: READ_TIMEOUT_MS,
    })
    if (response.statusCode !== 200) {
      await response.body.dump()
      return null
    }
    return await response.body.json()
  } catch {
    return null
  }
}
