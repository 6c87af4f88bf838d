// One graphile-worker process of bench/scale: says `ready`, waits for `go` on stdin, runs a worker
// pool of <concurrency> over the no-op task `noop` until `stop` arrives, then prints how many jobs it
// completed and the CPU time it used from `go`. Defaults otherwise (no local queue, no batched completion), as a plain install runs it.
// Usage: node --import tsx bench/scale/graphile-runner.ts <database-url> <concurrency>
import {EventEmitter} from 'node:events'
import {createInterface} from 'node:readline'
import {Logger, run, type WorkerEvents} from 'graphile-worker'

const [url, concurrency] = process.argv.slice(2) as [string, string]
// An iterator buffers lines: `stop` may arrive before run() has returned (a small backlog drains first).
const lines = createInterface({input: process.stdin})[Symbol.asyncIterator]()
process.stdout.write('ready\n')
await lines.next()
const cpuBefore = process.cpuUsage()
let completed = 0
// Counted from the first job on: run() may return after the first jobs are done.
const events: WorkerEvents = new EventEmitter()
events.on('job:success', () => completed++)
const runner = await run({
  events,
  connectionString: url,
  concurrency: Number(concurrency),
  // One connection per job at once, and one for LISTEN.
  maxPoolSize: Number(concurrency) + 1,
  noHandleSignals: true,
  logger: new Logger(() => () => {}),
  taskList: {noop: async () => {}},
})
await lines.next()
await runner.stop()
const cpu = process.cpuUsage(cpuBefore)
process.stdout.write(`${JSON.stringify({completed, cpuMicros: cpu.user + cpu.system})}\n`)
