// Projects in the shapes of the create-cloudflare and Cloudflare templates that use KV, D1, Queues or
// cron triggers (written for this test, not copied): a Hono + D1 CRUD API with migrations
// (wrangler.jsonc), a KV counter, a scheduled() Worker and a queue producer/consumer, all TypeScript
// with `satisfies ExportedHandler<Env>`. Each deploys unchanged through the CLI to a real edge host,
// and answers the same requests as wrangler's own build of it under miniflare (the oracle: what
// `wrangler dev` runs), the migrations applied to both.
import {execFile} from 'node:child_process'
import {readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {promisify} from 'node:util'
import {request} from 'undici'
import {beforeAll, describe, expect, test} from 'vitest'
import {kitWithHost} from '../support/cli-kit.js'
import {wranglerBuild} from '../support/wrangler-oracle.js'

const HONO = '4.10.4'
const COMPATIBILITY_DATE = '2025-06-01'

interface Call {
  method?: string
  path: string
  body?: unknown
}

/** The answers to `calls`, in order, from `fetcher` (the host's URL, or miniflare's dispatchFetch). */
async function answersOf(send: (call: Call) => Promise<{status: number; body: string}>, calls: Call[]) {
  const answers: Array<{status: number; body: string}> = []
  for (const call of calls) answers.push(await send(call))
  return answers
}

const hostSender = (url: string) => async (call: Call) => {
  const response = await request(new URL(call.path.slice(1), url), {
    method: (call.method ?? 'GET') as 'GET',
    body: call.body === undefined ? undefined : JSON.stringify(call.body),
    headers: call.body === undefined ? {} : {'content-type': 'application/json'},
  })
  return {status: response.statusCode, body: await response.body.text()}
}

const miniflareSender =
  (miniflare: {dispatchFetch: (url: string, init?: object) => Promise<{status: number; text(): Promise<string>}>}) => async (call: Call) => {
    const response = await miniflare.dispatchFetch(`http://localhost${call.path}`, {
      method: call.method ?? 'GET',
      body: call.body === undefined ? undefined : JSON.stringify(call.body),
      headers: call.body === undefined ? {} : {'content-type': 'application/json'},
    })
    return {status: response.status, body: await response.text()}
  }

const HONO_D1 = {
  'wrangler.jsonc': `{
  // A Hono API over D1, as the templates lay it out.
  "$schema": "node_modules/wrangler/config-schema.json",
  "name": "notes-api",
  "main": "src/index.ts",
  "compatibility_date": "${COMPATIBILITY_DATE}",
  "observability": {"enabled": true},
  "d1_databases": [
    {"binding": "DB", "database_name": "notes", "database_id": "00000000-0000-0000-0000-000000000001", "migrations_dir": "migrations"},
  ],
}
`,
  'migrations/0001_create_notes.sql': 'CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0);\n',
  'src/index.ts': `import {Hono} from 'hono'

type Bindings = {DB: D1Database}
type Note = {id: number; title: string; done: number}

const app = new Hono<{Bindings: Bindings}>()

app.get('/api/notes', async (c) => {
  const {results} = await c.env.DB.prepare('SELECT * FROM notes ORDER BY id').all<Note>()
  return c.json(results)
})
app.post('/api/notes', async (c) => {
  const {title} = await c.req.json<{title?: string}>()
  if (!title) return c.json({error: 'title is required'}, 400)
  const note = await c.env.DB.prepare('INSERT INTO notes (title) VALUES (?) RETURNING *').bind(title).first<Note>()
  return c.json(note, 201)
})
app.get('/api/notes/:id', async (c) => {
  const note = await c.env.DB.prepare('SELECT * FROM notes WHERE id = ?').bind(Number(c.req.param('id'))).first<Note>()
  return note ? c.json(note) : c.json({error: 'not found'}, 404)
})
app.put('/api/notes/:id', async (c) => {
  const {done} = await c.req.json<{done: boolean}>()
  const {meta} = await c.env.DB.prepare('UPDATE notes SET done = ? WHERE id = ?').bind(done ? 1 : 0, Number(c.req.param('id'))).run()
  return c.json({updated: meta.changes})
})
app.delete('/api/notes/:id', async (c) => {
  const {meta} = await c.env.DB.prepare('DELETE FROM notes WHERE id = ?').bind(Number(c.req.param('id'))).run()
  return c.json({deleted: meta.changes})
})

export default app
`,
}

const HONO_D1_CALLS: Call[] = [
  {path: '/api/notes'},
  {method: 'POST', path: '/api/notes', body: {title: 'write the report'}},
  {method: 'POST', path: '/api/notes', body: {title: 'run the benches'}},
  {method: 'POST', path: '/api/notes', body: {}},
  {method: 'PUT', path: '/api/notes/1', body: {done: true}},
  {path: '/api/notes/1'},
  {method: 'DELETE', path: '/api/notes/2'},
  {path: '/api/notes/2'},
  {path: '/api/notes'},
]

const KV_COUNTER = {
  'wrangler.toml': `name = "kv-counter"\nmain = "src/index.ts"\ncompatibility_date = "${COMPATIBILITY_DATE}"\n\n[[kv_namespaces]]\nbinding = "COUNTER"\nid = "0f2ac74b498b48028cb68387c421e279"\n`,
  'src/index.ts': `interface Env {
  COUNTER: KVNamespace
}

export default {
  async fetch(request, env): Promise<Response> {
    const {pathname} = new URL(request.url)
    if (pathname === '/favicon.ico') return new Response(null, {status: 404})
    const key = \`hits:\${pathname}\`
    const hits = Number((await env.COUNTER.get(key)) ?? 0) + 1
    await env.COUNTER.put(key, String(hits), {metadata: {last: pathname}})
    const {keys} = await env.COUNTER.list({prefix: 'hits:'})
    return Response.json({path: pathname, hits, paths: keys.map((entry) => [entry.name, entry.metadata])})
  },
} satisfies ExportedHandler<Env>
`,
}

const KV_COUNTER_CALLS: Call[] = [{path: '/'}, {path: '/'}, {path: '/about'}, {path: '/favicon.ico'}, {path: '/'}]

const SCHEDULED = {
  'wrangler.toml': `name = "scheduled"\nmain = "src/index.ts"\ncompatibility_date = "${COMPATIBILITY_DATE}"\n\n[triggers]\ncrons = ["*/15 * * * *"]\n\n[[kv_namespaces]]\nbinding = "RUNS"\nid = "runs"\n`,
  'src/index.ts': `interface Env {
  RUNS: KVNamespace
}

export default {
  async fetch(request, env): Promise<Response> {
    if (new URL(request.url).pathname !== '/runs') return new Response('Cron triggers run scheduled(); the last runs: see /runs')
    const {keys} = await env.RUNS.list({prefix: 'run:'})
    return Response.json(await Promise.all(keys.map(async (key) => [key.name, await env.RUNS.get(key.name)])))
  },
  async scheduled(controller, env, ctx): Promise<void> {
    ctx.waitUntil(env.RUNS.put(\`run:\${controller.scheduledTime}\`, controller.cron))
  },
} satisfies ExportedHandler<Env>
`,
}

const QUEUES = {
  'wrangler.toml': [
    'name = "queues"',
    'main = "src/index.ts"',
    `compatibility_date = "${COMPATIBILITY_DATE}"`,
    '[[queues.producers]]',
    'binding = "MY_QUEUE"',
    'queue = "my-queue"',
    '[[queues.consumers]]',
    'queue = "my-queue"',
    'max_batch_size = 10',
    'max_batch_timeout = 1',
    '[[kv_namespaces]]',
    'binding = "RECEIVED"',
    'id = "received"',
  ].join('\n'),
  'src/index.ts': `interface Env {
  MY_QUEUE: Queue<{url: string; method: string}>
  RECEIVED: KVNamespace
}

export default {
  async fetch(request, env): Promise<Response> {
    const {pathname} = new URL(request.url)
    if (pathname === '/received') {
      const {keys} = await env.RECEIVED.list()
      return Response.json(await Promise.all(keys.map(async (key) => env.RECEIVED.get(key.name, 'json'))))
    }
    await env.MY_QUEUE.send({url: pathname, method: request.method})
    return new Response('Sent message to the queue')
  },
  async queue(batch, env): Promise<void> {
    for (const message of batch.messages) {
      await env.RECEIVED.put(\`message:\${message.body.url}\`, JSON.stringify({queue: batch.queue, body: message.body, attempts: message.attempts}))
      message.ack()
    }
  },
} satisfies ExportedHandler<Env, {url: string; method: string}>
`,
}

describe('template-shaped projects deploy unchanged and answer as under wrangler dev', () => {
  let now = Date.parse('2030-01-01T00:00:30Z')
  const kit = kitWithHost('templates', {settings: {shards: 1}, cronClock: () => now})
  beforeAll(async () => {
    writeFileSync(path.join(kit.root, 'package.json'), JSON.stringify({name: 'templates', private: true, dependencies: {hono: HONO}}))
    await promisify(execFile)('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], {cwd: kit.root})
  }, 240_000)

  test('Hono + D1 CRUD with migrations (wrangler.jsonc)', {timeout: 180_000}, async () => {
    const dir = kit.project('notes-api', HONO_D1)
    const {url, department} = await kit.deploy(dir)
    expect((await kit.cli('d1', 'migrations', 'apply', department, 'DB', '--project', dir)).code).toBe(0)
    const oracle = await wranglerBuild(dir, {compatibilityDate: COMPATIBILITY_DATE, d1Databases: {DB: 'notes'}})
    try {
      const database = await oracle.miniflare.getD1Database('DB')
      await database.prepare(readFileSync(path.join(dir, 'migrations/0001_create_notes.sql'), 'utf8')).run()
      const expected = await answersOf(miniflareSender(oracle.miniflare), HONO_D1_CALLS)
      expect(expected.map((answer) => answer.status)).toEqual([200, 201, 201, 400, 200, 200, 200, 404, 200])
      expect(await answersOf(hostSender(url), HONO_D1_CALLS)).toEqual(expected)
    } finally {
      await oracle.dispose()
    }
  })

  test('a KV counter', {timeout: 120_000}, async () => {
    const dir = kit.project('kv-counter', KV_COUNTER)
    const {url} = await kit.deploy(dir)
    const oracle = await wranglerBuild(dir, {compatibilityDate: COMPATIBILITY_DATE, kvNamespaces: {COUNTER: 'counter'}})
    try {
      const expected = await answersOf(miniflareSender(oracle.miniflare), KV_COUNTER_CALLS)
      expect(JSON.parse(expected.at(-1)!.body)).toMatchObject({hits: 3})
      expect(await answersOf(hostSender(url), KV_COUNTER_CALLS)).toEqual(expected)
    } finally {
      await oracle.dispose()
    }
  })

  test('a scheduled() Worker: the host runs it on its crons with the cron and the occurrence, as miniflare does when asked', {timeout: 120_000}, async () => {
    const dir = kit.project('scheduled', SCHEDULED)
    const {url, department} = await kit.deploy(dir)
    // The first look at a new trigger starts it from now; then the clock passes an occurrence.
    await kit.host.host.runDueCronTriggers()
    const occurrence = Date.parse('2030-01-01T00:15:00Z')
    now = occurrence + 100
    await kit.host.host.runDueCronTriggers()
    const host = hostSender(url)
    const oracle = await wranglerBuild(dir, {compatibilityDate: COMPATIBILITY_DATE, kvNamespaces: {RUNS: 'runs'}})
    try {
      // miniflare's Fetcher type does not declare scheduled(); workerd's Fetcher has it.
      const worker = (await oracle.miniflare.getWorker()) as unknown as {scheduled(options: {cron: string; scheduledTime: Date}): Promise<unknown>}
      await worker.scheduled({cron: '*/15 * * * *', scheduledTime: new Date(occurrence)})
      const expected = await answersOf(miniflareSender(oracle.miniflare), [{path: '/'}, {path: '/runs'}])
      expect(JSON.parse(expected[1]!.body)).toEqual([[`run:${occurrence}`, '*/15 * * * *']])
      expect(await answersOf(host, [{path: '/'}, {path: '/runs'}])).toEqual(expected)
      const listed = JSON.parse((await kit.cli('triggers', 'list', department, '--json')).stdout) as {triggers: Array<Record<string, unknown>>}
      expect(listed.triggers).toMatchObject([{cron: '*/15 * * * *', lastRunAt: occurrence, lastOutcome: 'ok'}])
    } finally {
      await oracle.dispose()
    }
  })

  test('a queue producer and consumer in one Worker', {timeout: 120_000}, async () => {
    const dir = kit.project('queues', QUEUES)
    const {url} = await kit.deploy(dir)
    const oracle = await wranglerBuild(dir, {
      compatibilityDate: COMPATIBILITY_DATE,
      kvNamespaces: {RECEIVED: 'received'},
      queueProducers: {MY_QUEUE: 'my-queue'},
      queueConsumers: {'my-queue': {maxBatchSize: 10, maxBatchTimeout: 1}},
    })
    const sends: Call[] = [{path: '/first'}, {method: 'POST', path: '/second'}, {path: '/third'}]
    const received = async (send: (call: Call) => Promise<{status: number; body: string}>) => {
      for (let tries = 0; ; tries++) {
        const answer = await send({path: '/received'})
        if ((JSON.parse(answer.body) as unknown[]).length === sends.length || tries > 300) return answer
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    try {
      const expected = await answersOf(miniflareSender(oracle.miniflare), sends)
      const expectedReceived = await received(miniflareSender(oracle.miniflare))
      expect(JSON.parse(expectedReceived.body)).toHaveLength(sends.length)
      expect(await answersOf(hostSender(url), sends)).toEqual(expected)
      expect(await received(hostSender(url))).toEqual(expectedReceived)
    } finally {
      await oracle.dispose()
    }
  })
})
