// Tenant isolation benchmark (issue #15), two figures for BENCHMARKS.md:
//   1. host RSS under held malicious connections: a real `edgeworkers host serve` process; half the
//      connections announce an 11 MB upload with forged signature headers on the management
//      listener, half send a body with a signature header to a public Worker on the data plane;
//      each sends 1 MiB and holds its connection open. RSS of the host process (not its workerd)
//      idle, while they are held, and 10 s after they closed.
//   2. neighbour unavailability: an infinite-loop Worker and a memory-bomb Worker next to a victim
//      on one shard; per incident, how long the victim was unavailable (from its first request
//      that did not answer at once to its next answer), and the incident that quarantined each.
//
//   node --import tsx bench/isolation/run.ts [--connections 1000] [--incidents 3]
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import pino from 'pino'
import {request} from 'undici'
import {startHost} from '../../src/edge-host/host.js'
import type {UploadScript} from '../../src/protocol/management-api.js'
import {paths} from '../support/paths.js'
import {HostClient, pairHost} from '../support/host.js'
import {pairingCodeOf, serveHost} from '../support/serve.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({options: {connections: {type: 'string', default: '1000'}, incidents: {type: 'string', default: '3'}}})
const CONNECTIONS = Number(options.connections)
const INCIDENTS = Number(options.incidents)
const MiB = 1024 * 1024
const BIN = path.join(fileURLToPath(new URL('../..', import.meta.url)), 'bin', 'run.js')
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function upload(source: string): UploadScript {
  return {
    mainModule: 'index.js',
    compatibilityDate: '2026-11-01',
    builderPolicy: 'department-worker-project-v2.9',
    releaseGeneration: `bench-${Buffer.from(source).toString('base64url').slice(0, 40)}`,
    modules: [{name: 'index.js', type: 'esModule', contentBase64: Buffer.from(source).toString('base64')}],
  } as UploadScript
}

const deploy = (adminUrl: string, secret: string, name: string, source: string) => new HostClient(adminUrl, secret).deploy(name, upload(source))

const rssOf = (pid: number) => Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024

function hold(url: string, target: string, headers: Record<string, string>): net.Socket {
  const {hostname, port} = new URL(url)
  const socket = net.connect(Number(port), hostname, () => {
    const head = [`PUT ${target} HTTP/1.1`, `host: ${hostname}`, 'content-type: application/json', `content-length: ${11 * MiB}`]
    for (const [name, value] of Object.entries(headers)) head.push(`${name}: ${value}`)
    socket.write(`${head.join('\r\n')}\r\n\r\n`)
    socket.write(Buffer.alloc(MiB, 0x20))
  })
  socket.on('error', () => {})
  return socket
}

async function heldConnections(): Promise<string> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ew-bench-iso-'))
  const {child, adminUrl, publicUrl} = await serveHost(BIN, dataDir, {env: {EDGEWORKERS_HOST__SHARDS: '1'}})
  try {
    const pairingCode = await pairingCodeOf(BIN, dataDir)
    const secret = await pairHost(adminUrl, pairingCode)
    const worker = `dw-${'b'.repeat(48)}`
    await deploy(adminUrl, secret, worker, 'export default { fetch() { return new Response("public") } }')
    await sleep(2_000)
    const idle = rssOf(child.pid!)
    const now = String(Math.floor(Date.now() / 1000))
    const forged = (i: number) => ({
      'x-edgeworkers-timestamp': now,
      'x-edgeworkers-nonce': `bench-nonce-${i}-xxxxxxxxxxxx`,
      'x-edgeworkers-signature': '0'.repeat(64),
    })
    const sockets = Array.from({length: CONNECTIONS}, (_, i) =>
      i % 2 === 0 ? hold(adminUrl, paths.script(`dw-${'c'.repeat(48)}`), forged(i)) : hold(publicUrl, `/${worker}/`, forged(i)),
    )
    await sleep(5_000)
    const peak = rssOf(child.pid!)
    for (const socket of sockets) socket.destroy()
    await sleep(10_000)
    const after = rssOf(child.pid!)
    const mb = (bytes: number) => `${Math.round(bytes / MiB)} MB`
    return `| ${CONNECTIONS} held connections (½ admin forged uploads, ½ data plane signed-header bodies), 1 MiB sent each | ${mb(idle)} | ${mb(peak)} (+${mb(peak - idle)}) | ${mb(after)} (+${mb(after - idle)}) |`
  } finally {
    child.kill('SIGTERM')
    await new Promise((resolve) => child.once('exit', resolve))
    rmSync(dataDir, {recursive: true, force: true})
  }
}

async function neighbours(): Promise<string[]> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ew-bench-iso-'))
  const host = await startHost({dataDir, settings: {listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', shards: 1}, logger: pino({level: 'silent'})})
  const rows: string[] = []
  try {
    const secret = await pairHost(host.adminUrl, host.issuedPairingCode!)
    const victim = `dw-${'1'.repeat(48)}`
    await deploy(host.adminUrl, secret, victim, 'export default { fetch() { return new Response("victim") } }')
    const offenders = [
      ['infinite loop', `dw-${'2'.repeat(48)}`, 'export default { fetch() { for (;;) {} } }'],
      ['memory bomb', `dw-${'3'.repeat(48)}`, 'export default { fetch() { const hoard = []; for (;;) hoard.push(new Uint8Array(16 << 20).fill(1)) } }'],
    ] as const
    for (const [, name, source] of offenders) await deploy(host.adminUrl, secret, name, source)
    const get = async (name: string) => {
      const began = performance.now()
      try {
        const response = await request(`${host.publicUrl}/${name}/`, {headersTimeout: 60_000})
        const text = await response.body.text()
        return {ok: response.statusCode === 200 && text === 'victim', status: response.statusCode, ms: performance.now() - began}
      } catch {
        return {ok: false, status: 0, ms: performance.now() - began}
      }
    }
    for (const [label, name] of offenders) {
      const downs: number[] = []
      let quarantinedAt = 0
      for (let incident = 1; incident <= INCIDENTS + 1; incident++) {
        let done = false
        const offending = get(name).then((answer) => ((done = true), answer))
        let downSince: number | null = null
        let worst = 0
        while (!done) {
          const began = performance.now()
          const answer = await get(victim)
          if (answer.ok && answer.ms < 200 && downSince === null) {
            await sleep(20)
            continue
          }
          downSince ??= began
          if (answer.ok) {
            worst = Math.max(worst, performance.now() - downSince)
            downSince = null
          }
        }
        const answer = await offending
        if (answer.status === 503) {
          quarantinedAt = incident
          break
        }
        downs.push(worst)
      }
      rows.push(
        `| ${label} | ${downs.map((ms) => `${(ms / 1000).toFixed(2)} s`).join(', ')} | ${(median(downs) / 1000).toFixed(2)} s | refused (503) from request ${quarantinedAt || 'never'} |`,
      )
    }
  } finally {
    await host.stop()
    rmSync(dataDir, {recursive: true, force: true})
  }
  return rows
}

log(`machine: ${os.cpus().length} cores, ${machineLoad()}`)
const memory = await heldConnections()
const isolation = await neighbours()
console.log(`
| scenario | host RSS idle | while held | 10 s after they closed |
|---|---|---|---|
${memory}

| offender next to a victim (one shard) | victim unavailable per incident | median | offender |
|---|---|---|---|
${isolation.join('\n')}
`)
process.exit(0)
