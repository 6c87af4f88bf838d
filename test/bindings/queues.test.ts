// Queues (wrangler's queues.producers / queues.consumers) against a real edge host running real
// workerd, under both host.code_loading modes: one Worker produces on fetch and consumes in queue(),
// recording each batch it is given in a Durable Object of its own. What it receives — batches,
// bodies in every format, attempts, retries (per message, per batch, delayed by retry({delaySeconds})
// and by retry_delay), sends with delaySeconds, a handler that throws, dead letters — is compared with
// what miniflare (the oracle) delivers to the same Worker; explicit acks before a throw and ackAll()
// follow Cloudflare where miniflare differs (CLOUDFLARE_ACKS). Messages pending across a host restart
// and across a kill -9 of the shard's workerd are all delivered; bad queues are refused in one line.
import {existsSync, readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {Miniflare} from 'miniflare'
import {request} from 'undici'
import {beforeAll, describe, expect, test} from 'vitest'
import {expectDeployRefusals} from '../support/cli.js'
import {kitWithHost} from '../support/cli-kit.js'
import {QUEUES_CONFIG, QUEUES_WORKER} from './queues-worker-fixture.js'

const COMPATIBILITY_DATE = '2025-06-01'

interface Delivered {
  id: string
  timestamp: number
  attempts: number
  body: unknown
}
type Batch = {queue: string; messages: Delivered[]}
type Send = {binding: string; batch?: boolean; messages: Array<Record<string, unknown>>}

/** What the test sends, one request after another; then it waits until every expected delivery was made. */
const SENDS: Send[] = [
  {binding: 'BATCHED', batch: true, messages: ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((tag) => ({body: {tag}}))},
  {binding: 'RETRIED', batch: true, messages: [{body: {tag: 'acked'}}, {body: {tag: 'twice', retryUntil: 2}}, {body: {tag: 'dead', retryUntil: 99}}]},
  {binding: 'THROWN', messages: [{body: {tag: 'boom', throwUntil: 99}}]},
  {binding: 'THROWN', messages: [{body: {tag: 'later', retryAll: 2}}]},
  {
    binding: 'FORMATS',
    messages: [
      {body: {json: [1, 'two']}, contentType: 'json'},
      {body: 'plain text', contentType: 'text'},
      {bytes: [0, 1, 254, 255], contentType: 'bytes'},
      {map: [['k', 'v']], contentType: 'v8'},
      {body: 'a default format'},
    ],
  },
  {binding: 'ACKED', batch: true, messages: [{body: {tag: 'acked', ack: true, throwOnce: true}}, {body: {tag: 'thrown once', throwOnce: true}}]},
  {binding: 'ACKALL', batch: true, messages: [{body: {tag: 'all acked'}}, {body: {tag: 'also acked'}}]},
  {binding: 'DELAYED', messages: [{body: {tag: 'sent late'}, delaySeconds: 1}, {body: {tag: 'retried later', retryLater: 2}}]},
]

/**
 * Deliveries per queue once everything settled: batched 7, retried 1 + 2 + 3, thrown 2 + 2, formats 5,
 * dead 1, acked 1 + 2 (retried after retry_delay), ackall 2 (never again), delayed 1 + 2.
 */
const EXPECTED_DELIVERIES = {batched: 7, retried: 6, thrown: 4, formats: 5, dead: 1, acked: 3, ackall: 2, delayed: 3}

/**
 * Per queue, each delivered message as the tag (or body) and its attempt, in delivery order, and the
 * batch sizes of `batched`.
 */
function deliveriesOf(batches: Batch[]): Record<string, unknown> {
  const byQueue: Record<string, unknown[]> = {}
  for (const batch of batches)
    for (const message of batch.messages) {
      const body = message.body as {tag?: string} | unknown
      ;(byQueue[batch.queue] ??= []).push({what: (body as {tag?: string})?.tag ?? body, attempts: message.attempts})
    }
  // Sorted where messages sent apart (or delayed apart) may or may not share a batch, by the machine's speed.
  for (const queue of ['thrown', 'delayed']) byQueue[queue]?.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))
  return {...byQueue, batchSizes: batches.filter((batch) => batch.queue === 'batched').map((batch) => batch.messages.length)}
}

/**
 * Where miniflare differs from Cloudflare (README "Queues"), the host follows Cloudflare: a message
 * acknowledged before its handler throws, and a batch acknowledged with ackAll(), are not delivered
 * again (miniflare retries them).
 */
const CLOUDFLARE_ACKS = {
  acked: [
    {what: 'acked', attempts: 1},
    {what: 'thrown once', attempts: 1},
    {what: 'thrown once', attempts: 2},
  ],
  ackall: [
    {what: 'all acked', attempts: 1},
    {what: 'also acked', attempts: 1},
  ],
}

function countOf(batches: Batch[], queue: string): number {
  return batches.filter((batch) => batch.queue === queue).reduce((sum, batch) => sum + batch.messages.length, 0)
}

const settled = (batches: Batch[]) => Object.entries(EXPECTED_DELIVERIES).every(([queue, count]) => countOf(batches, queue) >= count)

let oracle: {deliveries: Record<string, unknown>; batches: Batch[]}

beforeAll(async () => {
  const consumer = (settings: (typeof QUEUES_CONFIG.consumers)[number]) => ({
    maxBatchSize: settings.max_batch_size,
    maxBatchTimeout: settings.max_batch_timeout,
    maxRetries: 'max_retries' in settings ? settings.max_retries : 3,
    ...('retry_delay' in settings ? {retryDelay: settings.retry_delay} : {}),
    ...('dead_letter_queue' in settings ? {deadLetterQueue: settings.dead_letter_queue} : {}),
  })
  const mf = new Miniflare({
    modules: true,
    script: QUEUES_WORKER,
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: {LOG: {className: 'Log', useSQLite: true}},
    queueProducers: Object.fromEntries(QUEUES_CONFIG.producers.map((producer) => [producer.binding, {queueName: producer.queue}])),
    queueConsumers: Object.fromEntries(QUEUES_CONFIG.consumers.map((settings) => [settings.queue, consumer(settings)])),
  })
  try {
    for (const send of SENDS) {
      const response = await mf.dispatchFetch('http://oracle/send', {method: 'POST', body: JSON.stringify(send)})
      expect(await response.json()).toEqual({sent: send.messages.length})
    }
    const batches = await waitFor(async () => (await (await mf.dispatchFetch('http://oracle/received')).json()) as Batch[], settled)
    oracle = {deliveries: deliveriesOf(batches), batches}
  } finally {
    await mf.dispose()
  }
}, 120_000)

function wranglerToml(name: string, queues: {producers: readonly object[]; consumers: readonly object[]} = QUEUES_CONFIG): string {
  const table = (entries: object) =>
    Object.entries(entries)
      .map(([key, value]) => `${key} = ${JSON.stringify(value)}`)
      .join('\n')
  return [
    `name = "${name}"`,
    'main = "worker.js"',
    `compatibility_date = "${COMPATIBILITY_DATE}"`,
    '[[durable_objects.bindings]]',
    'name = "LOG"',
    'class_name = "Log"',
    ...queues.producers.flatMap((producer) => ['[[queues.producers]]', table(producer)]),
    ...queues.consumers.flatMap((consumer) => ['[[queues.consumers]]', table(consumer)]),
  ].join('\n')
}

describe.each(['restart', 'loader'] as const)('code_loading = %s', (codeLoading) => {
  const kit = kitWithHost(`queues-${codeLoading}`, (_root) => ({
    settings: {shards: 1, code_loading: codeLoading, worker_log_file: path.join(kit.root, 'workers.log')},
  }))
  const logFile = path.join(kit.root, 'workers.log')
  const {cli, project, deploy} = kit

  async function send(url: string, body: Send): Promise<unknown> {
    const response = await request(`${url.replace(/\/$/, '')}/send`, {method: 'POST', body: JSON.stringify(body)})
    expect(response.statusCode).toBe(200)
    return response.body.json()
  }

  async function received(url: string): Promise<Batch[]> {
    const response = await request(`${url.replace(/\/$/, '')}/received`)
    expect(response.statusCode).toBe(200)
    return (await response.body.json()) as Batch[]
  }

  const receivedOnce = (url: string, until: (batches: Batch[]) => boolean): Promise<Batch[]> => waitFor(() => received(url), until)

  test('batches, bodies, attempts, retries and dead letters are what miniflare delivers', {timeout: 240_000}, async () => {
    const dir = project('ops', {'wrangler.toml': wranglerToml('ops'), 'worker.js': QUEUES_WORKER})
    const plan = JSON.parse((await cli('deploy', dir, '--dry-run', '--json')).stdout)
    expect(plan.bindings.queues.consumers[0]).toEqual({
      queue: 'batched',
      maxBatchSize: 3,
      maxBatchTimeout: 1,
      maxRetries: 3,
      retryDelay: 0,
      deadLetterQueue: null,
      maxConcurrency: 1,
    })
    const {url} = await deploy(dir)
    for (const body of SENDS) expect(await send(url, body)).toEqual({sent: body.messages.length})
    const batches = await receivedOnce(url, settled)
    expect(deliveriesOf(batches)).toEqual({...oracle.deliveries, ...CLOUDFLARE_ACKS})
    // A dead letter keeps its id and timestamp; every id is Cloudflare's 32 hex.
    const [dead] = batches.filter((batch) => batch.queue === 'dead').flatMap((batch) => batch.messages)
    const original = batches.flatMap((batch) => batch.messages).find((message) => message !== dead && message.id === dead!.id)
    expect(original).toMatchObject({timestamp: dead!.timestamp, body: {tag: 'dead'}})
    expect(batches.flatMap((batch) => batch.messages).every((message) => /^[0-9a-f]{32}$/.test(message.id))).toBe(true)
    // Each batch is a Worker invocation: in the Worker log (and `tail`) as QUEUE <queue name>.
    const queueEvents = () =>
      (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '')
        .split('\n')
        .filter((line) => line.includes('"QUEUE"'))
        .map((line) => JSON.parse(line) as {method: string; path: string})
    await waitFor(
      async () => queueEvents(),
      (events) => events.some((event) => event.path === 'batched'),
      30_000,
    )
  })

  test("Cloudflare's limits refuse a send in the producer", {timeout: 120_000}, async () => {
    const {url} = await deploy(project('limits', {'wrangler.toml': wranglerToml('limits'), 'worker.js': QUEUES_WORKER}))
    const refusal = async (body: Send) => ((await send(url, body)) as {error?: string}).error
    expect(await refusal({binding: 'FORMATS', messages: [{body: 'x'.repeat(128_001), contentType: 'text'}]})).toContain('exceeds the limit of 128000 bytes')
    expect(await refusal({binding: 'FORMATS', batch: true, messages: Array.from({length: 101}, () => ({body: 1}))})).toContain(
      '101 messages exceeds the limit of 100',
    )
    expect(
      await refusal({binding: 'FORMATS', batch: true, messages: Array.from({length: 3}, () => ({body: 'x'.repeat(100_000), contentType: 'text'}))}),
    ).toContain('exceeds the limit of 256000 bytes')
    expect(await refusal({binding: 'FORMATS', messages: [{body: 1, delaySeconds: 43_201}]})).toContain('Invalid delaySeconds 43201')
    // Nothing refused was stored: only the message sent after them arrives.
    expect(await send(url, {binding: 'FORMATS', messages: [{body: 'after the refusals', contentType: 'text'}]})).toEqual({sent: 1})
    const batches = await receivedOnce(url, (all) => countOf(all, 'formats') >= 1)
    expect(batches.flatMap((batch) => batch.messages.map((message) => message.body))).toEqual(['after the refusals'])
  })

  test('messages pending across a host restart and a kill -9 of workerd are all delivered', {timeout: 300_000}, async () => {
    const {url, script} = await deploy(project('durable', {'wrangler.toml': wranglerToml('durable'), 'worker.js': QUEUES_WORKER}))
    // `slow` waits 8 s for a batch to fill: the host restarts with all twenty on disk, none delivered.
    const tags = Array.from({length: 20}, (_, index) => `pending-${index}`)
    expect(await send(url, {binding: 'SLOW', batch: true, messages: tags.map((tag) => ({body: {tag}}))})).toEqual({sent: 20})
    await kit.host.restart()
    const afterRestart = await receivedOnce(url, (all) => countOf(all, 'slow') >= 20)
    expect(tagsOf(afterRestart, 'slow').sort()).toEqual([...tags].sort())

    // 120 messages in batches of 3; workerd is killed while they are being delivered.
    const many = Array.from({length: 120}, (_, index) => `m${index}`)
    for (let start = 0; start < many.length; start += 100)
      await send(url, {binding: 'BATCHED', batch: true, messages: many.slice(start, start + 100).map((tag) => ({body: {tag}}))})
    await receivedOnce(url, (all) => countOf(all, 'batched') >= 12)
    killShardWorkerd(kit.host.dataDir)
    const afterKill = await receivedOnce(url, (all) => new Set(tagsOf(all, 'batched')).size >= many.length)
    expect([...new Set(tagsOf(afterKill, 'batched'))].sort()).toEqual([...many].sort())
    expect(script).toMatch(/^dw-/)
  })

  // Refused at build, before the host is asked: one code-loading mode is enough.
  if (codeLoading === 'restart')
    test('bad queues are refused in one line, exit 2, nothing deployed', {timeout: 400_000}, async () => {
      const department = await kit.newDepartment()
      const producer = {binding: 'JOBS', queue: 'jobs'}
      const refusals: Array<[string, {producers: object[]; consumers: object[]}, string]> = [
        // A producer here and its consumer in another Worker (Cloudflare allows it): refused, the queue being this Worker's data.
        [
          'unconsumed',
          {producers: [producer], consumers: []},
          'queue "jobs" has no consumer in this Worker: a queue belongs to the Worker that produces it, and only that Worker consumes it',
        ],
        [
          'unknown',
          {producers: [producer], consumers: [{queue: 'jobs'}, {queue: 'elsewhere'}]},
          'queue "elsewhere" is neither produced by this Worker nor one of its dead-letter queues: a queue belongs to the Worker that produces it',
        ],
        ['twice', {producers: [producer], consumers: [{queue: 'jobs'}, {queue: 'jobs'}]}, 'queue "jobs" has more than one consumer'],
        ['own-dlq', {producers: [producer], consumers: [{queue: 'jobs', dead_letter_queue: 'jobs'}]}, 'cannot be its own dead-letter queue'],
        ['batch', {producers: [producer], consumers: [{queue: 'jobs', max_batch_size: 101}]}, 'key "queues.consumers[0].max_batch_size" must be at most 100'],
        [
          'timeout',
          {producers: [producer], consumers: [{queue: 'jobs', max_batch_timeout: 61}]},
          'key "queues.consumers[0].max_batch_timeout" must be at most 60',
        ],
        [
          'delay',
          {producers: [{...producer, delivery_delay: 43_201}], consumers: [{queue: 'jobs'}]},
          'key "queues.producers[0].delivery_delay" must be at most 43200',
        ],
        ['name', {producers: [{binding: 'JOBS', queue: 'no spaces'}], consumers: [{queue: 'no spaces'}]}, 'must be a queue name'],
        ['pull', {producers: [producer], consumers: [{queue: 'jobs', type: 'http_pull'}]}, 'only "worker" consumers are supported on-prem'],
      ]
      // A consumer whose Worker has no queue() handler does not start.
      const noHandler = QUEUES_WORKER.replace('async queue(batch, env)', 'async notQueue(batch, env)')
      await expectDeployRefusals(cli, department, [
        ...refusals.map(([name, queues, message]) => ({
          name,
          dir: project(name, {'wrangler.toml': wranglerToml(name, queues), 'worker.js': QUEUES_WORKER}),
          message,
        })),
        {
          name: 'no-handler',
          dir: project('no-handler', {'wrangler.toml': wranglerToml('no-handler'), 'worker.js': noHandler}),
          message: 'has no queue handler',
        },
      ])
      const workers = await cli('worker', 'list', '--json')
      expect((JSON.parse(workers.stdout) as Array<{department_id: string}>).map((worker) => worker.department_id)).not.toContain(department)
    })
})

/** Reads until `done` holds of what was read (a generous deadline: deliveries wait for batch timeouts). */
async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`not reached in ${timeoutMs} ms: ${JSON.stringify(value).slice(0, 2000)}`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

function tagsOf(batches: Batch[], queue: string): string[] {
  return batches.filter((batch) => batch.queue === queue).flatMap((batch) => batch.messages.map((message) => (message.body as {tag: string}).tag))
}

/** SIGKILLs the workerd of shard 0 (the host's watchdog starts it again). */
function killShardWorkerd(hostDataDir: string): void {
  const [record] = readdirSync(path.join(hostDataDir, 'runtime', 'pids')).filter((file) => file.startsWith('shard-0.'))
  process.kill(Number(path.extname(record!).slice(1)), 'SIGKILL')
}
