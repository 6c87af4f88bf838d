// A real HAProxy (Debian's /usr/sbin/haproxy) in front of edge hosts, for benchmarks and tests: started in the foreground on a
// configuration `lb config --haproxy` wrote, with a stats socket added so a caller can wait until
// HAProxy itself marks a server up or down (never a fixed sleep).
import {spawn, type ChildProcess} from 'node:child_process'
import {writeFileSync} from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

export const HAPROXY_BIN = '/usr/sbin/haproxy'

export interface RunningHaproxy {
  readonly child: ChildProcess
  /** The frontend's URL. */
  readonly url: string
  /** Each server's state as HAProxy sees it now: server name → UP, DOWN, … */
  servers(): Promise<Map<string, string>>
  /** Resolves once `condition` holds of the servers' states (rejects after `timeoutMs`). */
  waitFor(condition: (servers: Map<string, string>) => boolean, what: string, timeoutMs?: number): Promise<void>
  stop(): Promise<void>
}

/** A port free now on loopback (HAProxy's frontend needs one before it starts). */
export async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Starts HAProxy on `config` (its `bind` must be `url`'s address), in `dir`. */
export async function startHaproxy(config: string, url: string, dir: string): Promise<RunningHaproxy> {
  const socket = path.join(dir, 'haproxy.sock')
  const file = path.join(dir, 'haproxy.cfg')
  writeFileSync(file, config.replace(/^global\n/m, `global\n    stats socket ${socket} level admin\n`))
  const child = spawn(HAPROXY_BIN, ['-f', file, '-db'], {stdio: ['ignore', 'ignore', 'pipe']})
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const servers = async (): Promise<Map<string, string>> => {
    const csv = await command(socket, 'show stat')
    const states = new Map<string, string>()
    for (const line of csv.split('\n')) {
      const columns = line.split(',')
      if (columns[0] === 'edgeworkers_hosts' && columns[1] !== 'BACKEND') states.set(columns[1]!, columns[17]!)
    }
    return states
  }
  const waitFor = async (condition: (states: Map<string, string>) => boolean, what: string, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (child.exitCode !== null) throw new Error(`haproxy exited ${child.exitCode}: ${stderr}`)
      const states = await servers().catch(() => null)
      if (states && condition(states)) return
      if (Date.now() > deadline) throw new Error(`HAProxy: timed out waiting for ${what} (servers: ${JSON.stringify([...(states ?? [])])}; ${stderr})`)
      await sleep(50)
    }
  }
  await waitFor((states) => states.size > 0, 'HAProxy to start', 10_000)
  return {
    child,
    url,
    servers,
    waitFor,
    stop: async () => {
      if (child.exitCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    },
  }
}

function command(socket: string, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const connection = net.connect(socket)
    let out = ''
    connection.on('connect', () => connection.end(`${line}\n`))
    connection.on('data', (chunk) => (out += chunk.toString()))
    connection.on('end', () => resolve(out))
    connection.on('error', reject)
  })
}
