// Cloudflare's own templates that use D1, KV, Queues or cron triggers (fixtures/cloudflare-templates,
// copied from cloudflare/templates and create-cloudflare; SOURCES.md there names the commits), each
// deployed unchanged through the CLI to a real edge host and compared with wrangler's own build of it
// under miniflare (what `wrangler dev` runs), under the default host.code_loading (every binding is
// held against miniflare in both modes by its own test in test/bindings; these templates' Workers with
// data run on their own sockets in either mode), the migrations
// applied to both as `d1 migrations apply` applies them. Origins differ (the host's URL, miniflare's
// localhost) and are compared as "ORIGIN"; latencies and D1 bookmarks are each store's own.
import {execFile} from 'node:child_process'
import {cpSync, existsSync, readdirSync, readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {Writable} from 'node:stream'
import {promisify} from 'node:util'
import {request} from 'undici'
import {beforeAll, describe, expect, test} from 'vitest'
import {kitWithHost} from '../support/cli-kit.js'
import {wranglerBuild} from '../support/wrangler-oracle.js'

const TEMPLATES = path.resolve('fixtures/cloudflare-templates')
/** What the templates' package.json files pin (create-cloudflare's have no runtime dependencies). */
const PACKAGES = {chanfana: '2.8.3', hono: '4.11.1', zod: '3.25.67', 'durable-utils': '0.3.5', '@openauthjs/openauth': '0.4.3', valibot: '1.2.0'}

interface Call {
  method?: string
  path: string
  body?: string
  headers?: Record<string, string>
}
interface Answer {
  status: number
  body: string
  location: string | null
  contentType: string | null
  /** The names of the cookies the answer sets (their values go to the sender's cookie jar). */
  cookies: string[]
}
type Send = (call: Call) => Promise<Answer>

/** `text` with each of `origins` (as is, and percent-encoded as in a query) as ORIGIN. */
const withOrigin = (text: string, origins: string[]) =>
  origins.reduce((replaced, origin) => replaced.replaceAll(origin, 'ORIGIN').replaceAll(encodeURIComponent(origin), encodeURIComponent('ORIGIN')), text)

/** A browser's cookies: what answers set is sent with the next calls. */
type CookieJar = Map<string, string>
const withCookies = (call: Call, jar: CookieJar): Record<string, string> =>
  jar.size === 0 ? (call.headers ?? {}) : {...call.headers, cookie: [...jar].map(([name, value]) => `${name}=${value}`).join('; ')}
/** Keeps each `set-cookie` in `jar`; answers the names set. */
function keepCookies(setCookies: string[], jar: CookieJar): string[] {
  const names = setCookies.map((cookie) => {
    const [name, value] = cookie.split(';')[0]!.split(/=(.*)/s)
    jar.set(name!, value ?? '')
    return name!
  })
  return names.sort()
}

/** The host's answers; the Worker sees its requests at `http://<script>.workers.localhost`. */
const hostSender =
  (url: string, script: string, jar: CookieJar = new Map()): Send =>
  async (call) => {
    const origins = [`http://${script}.workers.localhost`, url.replace(/\/$/, '')]
    const response = await request(new URL(call.path.slice(1), url), {
      method: (call.method ?? 'GET') as 'GET',
      body: call.body,
      headers: withCookies(call, jar),
    })
    const header = (name: string) => {
      const value = response.headers[name]
      return typeof value === 'string' ? withOrigin(value, origins) : null
    }
    const setCookies = response.headers['set-cookie'] ?? []
    return {
      status: response.statusCode,
      body: withOrigin(await response.body.text(), origins),
      location: header('location'),
      contentType: header('content-type'),
      cookies: keepCookies(typeof setCookies === 'string' ? [setCookies] : setCookies, jar),
    }
  }

type Oracle = Awaited<ReturnType<typeof wranglerBuild>>
const miniflareSender =
  (oracle: Oracle, jar: CookieJar = new Map()): Send =>
  async (call) => {
    const response = await oracle.miniflare.dispatchFetch(`http://localhost${call.path}`, {
      method: call.method ?? 'GET',
      body: call.body,
      headers: withCookies(call, jar),
      redirect: 'manual',
    })
    const header = (name: string) => withOrigin(response.headers.get(name) ?? '', ['http://localhost']) || null
    return {
      status: response.status,
      body: withOrigin(await response.text(), ['http://localhost']),
      location: header('location'),
      contentType: header('content-type'),
      cookies: keepCookies(response.headers.getSetCookie(), jar),
    }
  }

async function answersOf(send: Send, calls: Call[], comparable: (answer: Answer) => Answer = (answer) => answer): Promise<Answer[]> {
  const answers: Answer[] = []
  for (const call of calls) answers.push(comparable(await send(call)))
  return answers
}

/** miniflare's option that keeps what its Worker prints in `printed`. */
const printTo = (printed: string[]) => (stdout: NodeJS.ReadableStream) =>
  stdout.pipe(
    new Writable({
      write: (chunk, _encoding, done) => {
        printed.push(String(chunk))
        done()
      },
    }),
  )

const json = (method: string, pathname: string, body: unknown): Call => ({
  method,
  path: pathname,
  body: JSON.stringify(body),
  headers: {'content-type': 'application/json'},
})

/** The migrations in `dir`/migrations, run on miniflare's database as `wrangler d1 migrations apply --local` runs them. */
async function migrateOracle(oracle: Oracle, binding: string, dir: string): Promise<void> {
  const database = await oracle.miniflare.getD1Database(binding)
  for (const file of readdirSync(path.join(dir, 'migrations')).sort()) await database.prepare(readFileSync(path.join(dir, 'migrations', file), 'utf8')).run()
}

describe.each(['loader'] as const)('code_loading = %s: Cloudflare templates using D1, KV, Queues and crons answer as under wrangler dev', (codeLoading) => {
  let now = Date.parse('2030-01-01T00:00:30Z')
  const kit = kitWithHost(`cloudflare-templates-${codeLoading}`, (root) => ({
    settings: {shards: 1, code_loading: codeLoading, worker_log_file: path.join(root, 'workers.log')},
    cronClock: () => now,
  }))
  const logLines = () => (existsSync(path.join(kit.root, 'workers.log')) ? readFileSync(path.join(kit.root, 'workers.log'), 'utf8') : '')

  /** The template copied into the kit's directory, with create-cloudflare's placeholders filled in as `npm create cloudflare` fills them. */
  function template(name: string): string {
    const dir = path.join(kit.root, 'projects', name)
    cpSync(path.join(TEMPLATES, name), dir, {recursive: true})
    for (const file of ['wrangler.jsonc', 'package.json']) {
      const full = path.join(dir, file)
      if (existsSync(full))
        writeFileSync(
          full,
          readFileSync(full, 'utf8').replaceAll('<WORKER_NAME>', name).replaceAll('<PACKAGE_NAME>', name).replaceAll('<COMPATIBILITY_DATE>', '2025-10-08'),
        )
    }
    return dir
  }

  beforeAll(async () => {
    writeFileSync(path.join(kit.root, 'package.json'), JSON.stringify({name: 'templates', private: true, dependencies: PACKAGES}))
    await promisify(execFile)('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], {cwd: kit.root})
  }, 240_000)

  test('d1-template: the comments its migration seeds, as HTML', {timeout: 180_000}, async () => {
    const dir = template('d1-template')
    const {url, script, department} = await kit.deploy(dir)
    const migrated = await kit.cli('d1', 'migrations', 'apply', department, 'DB', '--project', dir)
    expect(migrated.code, migrated.stderr).toBe(0)
    const oracle = await wranglerBuild(dir, {d1Databases: {DB: '151f7d9b-365f-41d7-83ed-0bf4eeef5086'}})
    try {
      await migrateOracle(oracle, 'DB', dir)
      const calls = [{path: '/'}, {path: '/anything'}]
      const expected = await answersOf(miniflareSender(oracle), calls)
      expect(expected[0]!.body).toContain('Keep up the good work!')
      expect(await answersOf(hostSender(url, script), calls)).toEqual(expected)
    } finally {
      await oracle.dispose()
    }
  })

  test('chanfana-openapi-template: D1 CRUD endpoints, validation errors and the OpenAPI document', {timeout: 180_000}, async () => {
    const dir = template('chanfana-openapi-template')
    const {url, script, department} = await kit.deploy(dir)
    expect((await kit.cli('d1', 'migrations', 'apply', department, 'DB', '--project', dir)).code).toBe(0)
    const oracle = await wranglerBuild(dir, {d1Databases: {DB: '18d141d5-062d-46a0-a92a-bade3f8c4b00'}})
    const task = {name: 'write the report', slug: 'report', description: 'for #32', completed: false, due_date: '2030-01-02T00:00:00.000Z'}
    const calls: Call[] = [
      {path: '/tasks'},
      json('POST', '/tasks', task),
      json('POST', '/tasks', {...task, name: 'run the benches', slug: 'benches'}),
      json('POST', '/tasks', {name: 'no slug'}),
      {path: '/tasks/1'},
      {path: '/tasks?search=bench'},
      json('PUT', '/tasks/1', {...task, completed: true}),
      {method: 'DELETE', path: '/tasks/2'},
      {path: '/tasks/2'},
      {path: '/tasks?page=1&per_page=1'},
      json('POST', '/dummy/example', {name: 'dummy'}),
      {path: '/openapi.json'},
      {path: '/'},
    ]
    try {
      await migrateOracle(oracle, 'DB', dir)
      const expected = await answersOf(miniflareSender(oracle), calls)
      expect(expected.map((answer) => answer.status)).toEqual([200, 201, 201, 400, 200, 200, 200, 200, 404, 200, 200, 200, 200])
      expect(await answersOf(hostSender(url, script), calls)).toEqual(expected)
    } finally {
      await oracle.dispose()
    }
  })

  test('d1-starter-sessions-api-template: D1 sessions, a table made on first use, and its static page', {timeout: 180_000}, async () => {
    const dir = template('d1-starter-sessions-api-template')
    const {url, script} = await kit.deploy(dir)
    const oracle = await wranglerBuild(dir, {d1Databases: {DB01: '3690f364-3425-4fab-8eb7-c74c5717578a'}})
    // Latency and the bookmark's value are each store's own; that there is a bookmark is not.
    const comparable = (answer: Answer): Answer => {
      if (answer.contentType !== 'application/json') return answer
      const parsed = JSON.parse(answer.body) as Record<string, unknown>
      return {...answer, body: JSON.stringify({...parsed, d1Latency: typeof parsed.d1Latency, sessionBookmark: typeof parsed.sessionBookmark})}
    }
    const calls: Call[] = [
      {path: '/api/orders'},
      json('POST', '/api/orders', {customerId: 'c-1', orderId: 'o-1', quantity: 3}),
      json('POST', '/api/orders', {customerId: 'c-2', orderId: 'o-2', quantity: 1}),
      json('POST', '/api/orders', {customerId: 'c-1', orderId: 'o-1', quantity: 9}),
      {path: '/api/orders', headers: {'x-d1-bookmark': 'first-primary'}},
      {method: 'POST', path: '/api/reset'},
      {path: '/api/orders'},
      {method: 'PUT', path: '/api/orders'},
    ]
    try {
      const expected = await answersOf(miniflareSender(oracle), calls, comparable)
      expect(JSON.parse(expected[4]!.body).results).toHaveLength(2)
      expect(await answersOf(hostSender(url, script), calls, comparable)).toEqual(expected)
      // The page beside the API is the template's own public/index.html.
      const page = await hostSender(url, script)({path: '/'})
      expect({status: page.status, body: page.body}).toEqual({status: 200, body: readFileSync(path.join(dir, 'public/index.html'), 'utf8')})
    } finally {
      await oracle.dispose()
    }
  })

  test('openauth-template: an OAuth sign-up, sign-in and token exchange on KV and D1', {timeout: 180_000}, async () => {
    const dir = template('openauth-template')
    const {url, script, department} = await kit.deploy(dir)
    expect((await kit.cli('d1', 'migrations', 'apply', department, 'AUTH_DB', '--project', dir)).code).toBe(0)
    const printed: string[] = []
    const oracle = await wranglerBuild(dir, {
      d1Databases: {AUTH_DB: 'd4dfb2e9-2fd3-4d04-9c83-57b4336a5958'},
      kvNamespaces: {AUTH_STORAGE: 'afec91ff3f7e4b0b9b9323fc6cf5ff85'},
      handleRuntimeStdio: printTo(printed),
    })
    // Keys, codes, tokens and user ids openauth makes are random: the shapes are compared, and the
    // values flow on as a browser's would (cookies, the emailed code from the Worker's log).
    const comparable = (answer: Answer): Answer => {
      const location = answer.location?.replace(/code=[^&]+/, 'code=CODE') ?? null
      if (answer.contentType !== 'application/json') return {...answer, location}
      const shape = (value: unknown): unknown =>
        Array.isArray(value)
          ? value.map(shape)
          : value && typeof value === 'object'
            ? Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, shape(inner)]))
            : typeof value
      return {...answer, location, body: JSON.stringify(shape(JSON.parse(answer.body)))}
    }
    const form = (pathname: string, fields: Record<string, string>): Call => ({
      method: 'POST',
      path: pathname,
      body: new URLSearchParams(fields).toString(),
      headers: {'content-type': 'application/x-www-form-urlencoded'},
    })
    /** A sign-up, its token exchange and a sign-in, as a browser at the Worker's `origin` makes them, as `email`. */
    const signUpAs = async (email: string, send: Send, origin: string, log: () => string): Promise<Answer[]> => {
      const authorize = `/authorize?${new URLSearchParams({redirect_uri: `${origin}/callback`, client_id: 'your-client-id', response_type: 'code'})}`
      const answers = await answersOf(send, [
        {path: '/'},
        {path: '/.well-known/oauth-authorization-server'},
        {path: '/.well-known/jwks.json'},
        {path: authorize},
        {path: '/password/register'},
        form('/password/register', {action: 'register', email, password: 'correct horse', repeat: 'another horse'}),
        form('/password/register', {action: 'register', email, password: 'correct horse', repeat: 'correct horse'}),
        form('/password/register', {action: 'verify', code: '000000x'}),
      ])
      const sentCode = () => new RegExp(`Sending code (\\d+) to ${email}`).exec(log())?.[1]
      await expect.poll(sentCode, {timeout: 30_000}).toBeDefined()
      const code = sentCode()!
      const verified = await send(form('/password/register', {action: 'verify', code}))
      const authorizationCode = decodeURIComponent(/[?&]code=([^&]+)/.exec(verified.location ?? '')?.[1] ?? '')
      const tokens = await send(
        form('/token', {grant_type: 'authorization_code', code: authorizationCode, redirect_uri: `${origin}/callback`, client_id: 'your-client-id'}),
      )
      const signIn = await answersOf(send, [
        {path: authorize},
        form('/password/authorize', {email, password: 'wrong'}),
        form('/password/authorize', {email, password: 'correct horse'}),
      ])
      return [...answers, verified, tokens, ...signIn].map(comparable).map((answer) => ({...answer, body: answer.body.replaceAll(email, 'EMAIL')}))
    }
    // openauth puts each authorization code with expirationTtl floor((expiry − now) / 1000) for an expiry
    // 60 s ahead: 59 — under KV's minimum of 60, refused by Cloudflare, miniflare and the host alike —
    // when the clock passes a millisecond between the two reads, as it does under load. The template's
    // own race: a browser would start again, and so does the flow, as another user.
    const signUp = async (browser: (jar: CookieJar) => Send, origin: string, log: () => string): Promise<Answer[]> => {
      for (let attempt = 1; ; attempt++) {
        const answers = await signUpAs(`ada${attempt}@example.com`, browser(new Map()), origin, log)
        const raced = answers.some((answer) => answer.location?.includes('Invalid+expiration_ttl+of+59'))
        if (!raced || attempt === 5) return answers
      }
    }
    try {
      await migrateOracle(oracle, 'AUTH_DB', dir)
      const expected = await signUp(
        (jar) => miniflareSender(oracle, jar),
        'http://localhost',
        () => printed.join(''),
      )
      expect(expected.map((answer) => answer.status)).toEqual([302, 200, 200, 302, 200, 200, 200, 200, 302, 200, 302, 401, 302])
      expect(expected[9]!.body).toContain('"access_token":"string"')
      const hostLog = () =>
        logLines()
          .split('\n')
          .filter((line) => line.includes(script))
          .join('\n')
      expect(await signUp((jar) => hostSender(url, script, jar), `http://${script}.workers.localhost`, hostLog)).toEqual(expected)
    } finally {
      await oracle.dispose()
    }
  })

  test('create-cloudflare queues: the producer answers, the consumer logs each message once', {timeout: 180_000}, async () => {
    const dir = template('c3-queues')
    const {url, script} = await kit.deploy(dir)
    const printed: string[] = []
    const oracle = await wranglerBuild(dir, {
      queueProducers: {MY_QUEUE: 'my-queue'},
      queueConsumers: ['my-queue'],
      handleRuntimeStdio: printTo(printed),
    })
    const calls: Call[] = [{path: '/first'}, {method: 'POST', path: '/second', body: 'x'}, {path: '/third?q=1'}]
    // What the consumer logged, by message: the request's URL and method (the headers are each server's own).
    const processed = (text: string) =>
      [...text.matchAll(/message ([0-9a-f]{32}) processed: (\{.*?\})(?:"|\n|$)/g)]
        .map(([, id, body]) => ({id, ...JSON.parse(body!.replaceAll('\\"', '"'))}))
        .map(({id, url, method}) => ({id, path: new URL(url).pathname + new URL(url).search, method}))
    const settled = async (read: () => string) => {
      await expect.poll(() => processed(read()).length, {timeout: 60_000}).toBe(calls.length)
      return processed(read())
    }
    try {
      const expected = await answersOf(miniflareSender(oracle), calls)
      expect(expected.map((answer) => answer.body)).toEqual(Array(3).fill('Sent message to the queue'))
      const expectedProcessed = await settled(() => printed.join(''))
      expect(await answersOf(hostSender(url, script), calls)).toEqual(expected)
      const hostProcessed = await settled(() =>
        logLines()
          .split('\n')
          .filter((line) => line.includes(script) && line.includes('"QUEUE"'))
          .join('\n'),
      )
      const withoutIds = (messages: Array<{id: string}>) =>
        messages.map(({id: _id, ...rest}) => rest).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))
      expect(withoutIds(hostProcessed)).toEqual(withoutIds(expectedProcessed))
      expect(new Set(hostProcessed.map((message) => message.id)).size).toBe(calls.length)
    } finally {
      await oracle.dispose()
    }
  })

  test('create-cloudflare scheduled: the host runs scheduled() on its cron with the outcome miniflare gives', {timeout: 180_000}, async () => {
    const dir = template('c3-scheduled')
    const {url, script, department} = await kit.deploy(dir)
    await kit.host.host.runDueCronTriggers()
    const occurrence = Date.parse('2030-01-01T00:01:00Z')
    now = occurrence + 100
    await kit.host.host.runDueCronTriggers()
    const oracle = await wranglerBuild(dir)
    try {
      const expected = await answersOf(miniflareSender(oracle), [{path: '/'}])
      expect(expected[0]!.body).toContain('ORIGIN/__scheduled?cron=*+*+*+*+*')
      expect(await answersOf(hostSender(url, script), [{path: '/'}])).toEqual(expected)
      // Its scheduled() fetches api.cloudflare.com: ok with the internet, an exception without, on both.
      const worker = (await oracle.miniflare.getWorker()) as unknown as {scheduled(options: {cron: string; scheduledTime: Date}): Promise<{outcome: string}>}
      const {outcome} = await worker.scheduled({cron: '* * * * *', scheduledTime: new Date(occurrence)})
      const listed = JSON.parse((await kit.cli('triggers', 'list', department, '--json')).stdout) as {triggers: Array<Record<string, unknown>>}
      expect(listed.triggers).toMatchObject([{cron: '* * * * *', lastRunAt: occurrence, lastOutcome: outcome}])
    } finally {
      await oracle.dispose()
    }
  })
})
