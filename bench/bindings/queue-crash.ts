// Queues across a kill -9 of the host: a real `edgeworkers host serve` process runs a Worker that
// produces MESSAGES messages (sendBatch of 100, from HTTP requests) to its own queue and consumes
// them, writing each delivery (message id, the producer's send try, message.attempts) to its D1
// database. The host is killed with SIGKILL (its workerd goes with it) while a consumer batch is in
// flight: once a third of the messages are consumed, the next batch writes its deliveries, records
// that it is held, and waits (a timer, so workerd does not take it for hung) instead of returning;
// the kill comes as soon as that record shows. The host is started again on the same data dir, and
// the batches whose send got no answer are sent again.
// At the end every message must have been delivered: lost = ids never delivered; each extra delivery
// of an id is a redelivery after the crash (attempts > 1: at-least-once, counted separately), a
// second send by the producer (a batch sent again whose first send had landed), or else delivered
// twice — which must be 0.
//
//   npm run build && node --import tsx bench/bindings/queue-crash.ts [--messages 10000]
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {request} from 'undici'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {HostClient, pairHost} from '../support/host.js'
import {pairingCodeOf, serveHost} from '../support/serve.js'
import {log, machineLoad} from '../support/stats.js'

const {values} = parseArgs({options: {messages: {type: 'string', default: '10000'}}})
const MESSAGES = Number(values.messages)
const BATCH = 100
const PRODUCERS = 4
const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))
/** With no new delivery for this long, the run ends with what it has. */
const STALL_MS = 120_000

/** How long the held batch waits: far longer than the bench takes to see it and kill the host. */
const HOLD_MS = 60_000

const WORKER = `const TABLES = "CREATE TABLE IF NOT EXISTS deliveries (id INTEGER NOT NULL, send INTEGER NOT NULL, attempts INTEGER NOT NULL); CREATE TABLE IF NOT EXISTS held (ids TEXT NOT NULL)";
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname.endsWith("/produce")) {
      const from = Number(url.searchParams.get("from"));
      const count = Number(url.searchParams.get("count"));
      const send = Number(url.searchParams.get("try"));
      await env.JOBS.sendBatch(Array.from({length: count}, (_, index) => ({body: {id: from + index, send}})));
      return new Response("sent");
    }
    await env.DB.exec(TABLES);
    if (url.pathname.endsWith("/count")) return Response.json(await env.DB.prepare("SELECT count(DISTINCT id) AS ids FROM deliveries").first("ids"));
    if (url.pathname.endsWith("/held")) return Response.json(await env.DB.prepare("SELECT ids FROM held").first("ids"));
    return Response.json(await env.DB.prepare("SELECT id, send, attempts FROM deliveries ORDER BY rowid").raw());
  },
  async queue(batch, env) {
    await env.DB.exec(TABLES);
    await env.DB.batch(batch.messages.map((message) => env.DB.prepare("INSERT INTO deliveries VALUES (?, ?, ?)").bind(message.body.id, message.body.send, message.attempts)));
    const consumed = await env.DB.prepare("SELECT count(DISTINCT id) AS ids FROM deliveries").first("ids");
    if (consumed < ${Math.floor(MESSAGES / 3)}) return;
    const ids = JSON.stringify(batch.messages.map((message) => message.body.id));
    const held = await env.DB.prepare("INSERT INTO held (ids) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM held)").bind(ids).run();
    if (held.meta.changes === 1) await scheduler.wait(${HOLD_MS});
  },
};`

async function get(url: string): Promise<{status: number; text: string}> {
  const response = await request(url, {headersTimeout: 30_000, bodyTimeout: 30_000})
  return {status: response.statusCode, text: await response.body.text()}
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'ew-bench-queue-crash-'))
const startHost = () => serveHost(BIN, dataDir, {env: {EDGEWORKERS_HOST__SHARDS: '1'}})
let host = await startHost()
try {
  const secret = await pairHost(host.adminUrl, await pairingCodeOf(BIN, dataDir))
  const script = scriptNameFor('bench-bindings-queue-crash')
  await new HostClient(host.adminUrl, secret).deploy(script, {
    ...moduleUpload(WORKER, [
      {type: 'queue', name: 'JOBS', queue: 'jobs', deliveryDelay: 0},
      {type: 'd1_database', name: 'DB', databaseId: 'ledger'},
    ]),
    queueConsumers: [{queue: 'jobs', maxBatchSize: BATCH, maxBatchTimeout: 1, maxRetries: 100, retryDelay: 0, deadLetterQueue: null, maxConcurrency: 1}],
  })
  const workerUrl = () => `${host.publicUrl}/${script}`
  const consumed = async () => Number((await get(`${workerUrl()}/count`)).text)
  const began = performance.now()

  // Producers send batches until the host dies; a batch without an answer is sent again after the restart.
  const unsent = Array.from({length: MESSAGES / BATCH}, (_, index) => index * BATCH)
  const unanswered: number[] = []
  let hostUp = true
  const produce = async (send: number) => {
    for (let from = unsent.shift(); from !== undefined; from = unsent.shift()) {
      if (!hostUp) {
        unanswered.push(from)
        continue
      }
      const answer = await get(`${workerUrl()}/produce?from=${from}&count=${BATCH}&try=${send}`).catch(() => null)
      if (answer?.status !== 200) unanswered.push(from)
    }
  }
  const producing = Promise.all(Array.from({length: PRODUCERS}, () => produce(1)))
  const heldBatch = async () => JSON.parse((await get(`${workerUrl()}/held`)).text) as string | null
  let held: string | null = null
  while (held === null) {
    await sleep(20)
    held = await heldBatch()
  }
  const inFlight = JSON.parse(held) as number[]
  hostUp = false
  host.child.kill('SIGKILL')
  const atKill = performance.now()
  await producing
  log(`killed the host with ${unanswered.length} batch(es) unanswered after ${((atKill - began) / 1000).toFixed(1)} s`)
  host = await startHost()
  hostUp = true
  unsent.push(...unanswered.splice(0))
  // The restarted host may take a moment to serve the Worker again: retry until each batch is answered.
  while (unsent.length > 0) {
    await produce(2)
    if (unanswered.length > 0) await sleep(200)
    unsent.push(...unanswered.splice(0))
  }

  let last = -1
  let progressAt = performance.now()
  for (;;) {
    const now = await consumed().catch(() => last)
    if (now !== last) progressAt = performance.now()
    last = now
    if (now >= MESSAGES || performance.now() - progressAt > STALL_MS) break
    await sleep(200)
  }
  const elapsed = (performance.now() - began) / 1000
  // Every delivery would not be seen while a consumer batch is still being written; a short wait for stragglers.
  await sleep(3_000)
  const deliveries = JSON.parse((await get(`${workerUrl()}/deliveries`)).text) as Array<[number, number, number]>
  const firstOf = new Map<number, [number, number, number]>()
  let redelivered = 0
  let sentTwice = 0
  let twice = 0
  for (const delivery of deliveries) {
    const first = firstOf.get(delivery[0])
    if (!first) firstOf.set(delivery[0], delivery)
    else if (delivery[2] > 1) redelivered++
    else if (delivery[1] !== first[1]) sentTwice++
    else twice++
  }
  const lost = MESSAGES - firstOf.size
  // The batch the kill cut: each of its messages is delivered again, its attempt counted.
  const inFlightAgain = inFlight.filter((id) => deliveries.some((delivery) => delivery[0] === id && delivery[2] > 1)).length
  const ok = lost === 0 && twice === 0 && inFlightAgain === inFlight.length
  console.log(
    `queue ${MESSAGES} messages, kill -9 of the host at ${((atKill - began) / 1000).toFixed(1)} s with a consumer batch of ${inFlight.length} in flight ` +
      `(${inFlightAgain} of them delivered again after the restart): delivered ${firstOf.size}, lost ${lost}, delivered twice ${twice}; ` +
      `redelivered after the crash ${redelivered}, sent twice by the producer's retry ${sentTwice}; all consumed in ${elapsed.toFixed(1)} s — ${ok ? 'PASS' : 'FAIL'} (${machineLoad()})`,
  )
  process.exitCode = ok ? 0 : 1
} finally {
  host.child.kill('SIGTERM')
  await new Promise((resolve) => (host.child.exitCode !== null ? resolve(null) : host.child.once('exit', resolve)))
  rmSync(dataDir, {recursive: true, force: true})
}
