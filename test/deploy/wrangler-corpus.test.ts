// The corpus (fixtures/corpus): Worker projects in the shapes real ones take — Hono, itty-router,
// chanfana, GraphQL, React and Preact SSR, tRPC, pg, jose and a dozen more npm packages, module rules,
// nodejs_compat, Durable Objects, KV, vars and define. Each is deployed through the CLI to one real
// edge host and built by wrangler itself (offline, served by miniflare: ../support/wrangler-oracle.ts);
// both must answer every request of the project alike. One npm ci of the corpus' workspace serves all.
import {readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {request} from 'undici'
import {expect, test} from 'vitest'
import {requestInit, type WorkerAnswer, type WorkerRequest, wranglerAnswers} from '../support/wrangler-oracle.js'
import {wranglerProjectsWorkspace} from '../support/wrangler-projects.js'

const CORPUS = fileURLToPath(new URL('../../fixtures/corpus', import.meta.url))
const {root, cli, nextDepartment} = wranglerProjectsWorkspace('wrangler-corpus', {workspace: CORPUS})

/** Response headers compared besides status and body. */
const HEADERS = ['content-type', 'location', 'x-scripts-removed']

const json = (pathname: string, method: string, body: unknown): WorkerRequest => ({
  path: pathname,
  method,
  body: JSON.stringify(body),
  headers: {'content-type': 'application/json'},
})

/** The requests each project answers; every project of the corpus has an entry. */
const REQUESTS: Record<string, WorkerRequest[]> = {
  'hono-routes': ['/', '/api/users', '/api/users/2', '/api/users/9', '/api/users/x', json('/api/echo', 'POST', {a: 1}), '/boom'],
  'hono-middleware': ['/', '/api/status', '/admin/panel', {path: '/admin/panel', headers: {authorization: `Basic ${btoa('admin:s3cret')}`}}, '/teapot'],
  'hono-zod-validator': [
    json('/signup', 'POST', {email: 'ada@example.com', age: 36}),
    json('/signup', 'POST', {email: 'nope', age: 3}),
    '/search?q=workers&page=2',
    '/search?q=w',
  ],
  'hono-openapi': ['/books/b1', '/books/zz', '/openapi.json'],
  'hono-jsx': ['/'],
  'hono-durable-object': [
    '/counters/a',
    {path: '/counters/a/increment?by=2', method: 'POST'},
    {path: '/counters/a/increment', method: 'POST'},
    '/counters/a',
    '/counters/b',
  ],
  'hono-kv': [json('/links/gh', 'PUT', {url: 'https://github.com/'}), json('/links/bad', 'PUT', {url: 'nope'}), '/gh', '/zz', '/links'],
  'itty-router-api': [
    '/todos',
    '/todos?done=true',
    '/todos/2',
    '/todos/7',
    json('/todos', 'POST', {title: 'ship'}),
    json('/todos', 'POST', {}),
    {path: '/todos/1', method: 'DELETE'},
    '/health',
    '/nothing',
  ],
  'itty-router-cors': [
    '/public/news',
    {path: '/public/news', method: 'OPTIONS', headers: {origin: 'https://app.example.com', 'access-control-request-method': 'GET'}},
    '/private',
    {path: '/private', headers: {authorization: 'Bearer letmein'}},
    '/else',
  ],
  'chanfana-tasks': [
    '/api/tasks',
    '/api/tasks?isCompleted=true&page=2',
    '/api/tasks?page=x',
    json('/api/tasks', 'POST', {name: 'n', slug: 's'}),
    json('/api/tasks', 'POST', {slug: 1}),
    '/openapi.json',
  ],
  'graphql-yoga': [
    json('/graphql', 'POST', {query: '{ planets(minMoons: 1) { name moons } hello(name: "Yoga") }'}),
    '/graphql?query=%7Bhello%7D',
    json('/graphql', 'POST', {query: '{ nope }'}),
  ],
  'graphql-schema': [
    '/?query=%7Bbooks%7Btitle%7D%7D',
    json('/', 'POST', {query: 'query($a: String) { books(author: $a) { title author } }', variables: {a: 'Austen'}}),
    '/',
  ],
  'react-ssr': ['/'],
  'react-stream': ['/'],
  'preact-ssr': ['/', '/?name=root'],
  'pg-client': ['/'],
  'jose-jwt': ['/token?role=admin', '/me', {path: '/me', headers: {authorization: 'Bearer not-a-jwt'}}],
  'zod-forms': [
    {
      path: '/',
      method: 'POST',
      body: 'name=Ada&email=ada%40example.com&topic=sales&newsletter=on',
      headers: {'content-type': 'application/x-www-form-urlencoded'},
    },
    {path: '/', method: 'POST', body: 'name=&email=x&topic=other', headers: {'content-type': 'application/x-www-form-urlencoded'}},
    '/',
  ],
  'valibot-forms': [json('/', 'POST', {sku: 'ABC-123', quantity: 2}), json('/', 'POST', {sku: 'abc', quantity: 0.5}), {path: '/', method: 'POST', body: '{'}],
  'marked-docs': ['/', '/guide', '/missing'],
  'trpc-api': [
    '/trpc/greet?input=%7B%22name%22%3A%22tRPC%22%7D',
    json('/trpc/add', 'POST', {a: 2, b: 40}),
    '/trpc/whoami',
    {path: '/trpc/whoami', headers: {'x-user': 'ada'}},
    '/trpc/greet',
  ],
  'superjson-api': [
    '/',
    {
      path: '/',
      method: 'POST',
      body: '{"json":{"when":"2030-05-01T00:00:00.000Z","tags":["b","a"],"price":"250:USD"},"meta":{"values":{"when":["Date"],"tags":["set"],"price":[["custom","money"]]}}}',
    },
  ],
  'date-fns-calendar': ['/?from=2024-02-26', '/?from=2025-12-24', '/?from=bad'],
  'yaml-config': ['/config.json', '/config.yaml', '/old', '/docs', '/x'],
  'xml-feed': [
    '/',
    {
      path: '/',
      method: 'POST',
      body: '<rss version="2.0"><channel><title>T</title><item><title>One</title></item><item><title>Two</title></item></channel></rss>',
    },
    {path: '/', method: 'POST', body: '<rss><channel>'},
  ],
  'cookie-session': ['/', {path: '/', headers: {cookie: 'visits=4; theme=dark'}}],
  'qs-query': ['/?a[b][c]=d&list[]=1&list[]=2&flag', '/?deep[a][b][c][d][e]=1'],
  'mustache-pages': ['/', '/?empty'],
  'csv-import': [
    {path: '/', method: 'POST', body: 'sku,qty,price\nA,2,1.5\nB,1,10\n"C, big",3,0.1\n'},
    {path: '/', method: 'POST', body: 'sku,qty,price\nA,2\n'},
    '/',
  ],
  'uuid-ids': ['/', '/?name=https%3A%2F%2Fedgeworkers.example%2F'],
  'html-rewriter': ['/'],
  'wasm-add': ['/?a=2&b=40', '/'],
  'node-builtins': ['/'],
  'stream-transform': [{path: '/', method: 'POST', body: 'first line\nsecond\nthird without newline'}, '/'],
  'vars-config': ['/', '/?who=team'],
  'als-request-id': [{path: '/', headers: {'x-trace-id': 'req-7'}}, '/'],
}

/**
 * The differences the kit keeps from wrangler's build (README, "Coming from wrangler"), each by the
 * answer that shows it: a JSON var's object keys reach the Worker sorted, because the version's
 * manifest is canonical JSON (its digests are over it).
 */
const KNOWN_DIFFERENCES: Record<string, RegExp> = {
  'vars-config': /"limits\\":\{\\"burst\\":\[1,2,3\],\\"requests\\":100\}.*wrangler .*"limits\\":\{\\"requests\\":100,\\"burst\\":\[1,2,3\]\}/,
}

interface Outcome {
  project: string
  packages: string[]
  result: 'same answers' | 'different answers' | 'kit failed' | 'wrangler failed'
  detail?: string
}

async function kitAnswers(dir: string, requests: WorkerRequest[]): Promise<WorkerAnswer[]> {
  const department = nextDepartment()
  const created = await cli('department', 'create', 'acme', department, '--id', department)
  if (created.code !== 0) throw new Error(created.stderr)
  const deployed = await cli('deploy', dir, '--department', department, '--json')
  if (deployed.code !== 0) throw new Error(deployed.stderr.trim() || deployed.stdout)
  const {url} = JSON.parse(deployed.stdout) as {url: string}
  const answers: WorkerAnswer[] = []
  for (const one of requests) {
    const {path: pathname, ...init} = requestInit(one)
    const response = await request(new URL(pathname.slice(1), url), {method: init.method as 'GET', body: init.body, headers: init.headers})
    answers.push({
      status: response.statusCode,
      body: await response.body.text(),
      headers: Object.fromEntries(HEADERS.map((name) => [name, (response.headers[name] as string | undefined) ?? null])),
    })
  }
  return answers
}

/**
 * An answer as compared: a stack trace a Worker puts in its body (tRPC does, in development) names
 * positions in the bundle, which differ between two builds of the same code — `<bundle position>`
 * stands for each.
 */
function comparable(answer: WorkerAnswer): string {
  return JSON.stringify({...answer, body: answer.body.replace(/(?:file:\/\/\S*\/)?[\w.-]+\.js:\d+:\d+/g, '<bundle position>')})
}

async function compare(project: string): Promise<Outcome> {
  const dir = path.join(root, project)
  const packages = Object.keys((JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {dependencies: object}).dependencies)
  const requests = REQUESTS[project]!
  const [ours, theirs] = await Promise.allSettled([kitAnswers(dir, requests), wranglerAnswers(dir, requests, HEADERS)])
  if (theirs.status === 'rejected') return {project, packages, result: 'wrangler failed', detail: String(theirs.reason)}
  if (ours.status === 'rejected') return {project, packages, result: 'kit failed', detail: String(ours.reason)}
  const differing = requests.findIndex((_, index) => comparable(ours.value[index]!) !== comparable(theirs.value[index]!))
  if (differing === -1) return {project, packages, result: 'same answers'}
  return {
    project,
    packages,
    result: 'different answers',
    detail: `${JSON.stringify(requests[differing])}: kit ${JSON.stringify(ours.value[differing])}, wrangler ${JSON.stringify(theirs.value[differing])}`,
  }
}

/** Runs `work` over `items`, `limit` at a time: most of a project's time is waiting on workerd starts, not CPU. */
async function pool<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = []
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const index = next++
      results[index] = await work(items[index]!)
    }
  }
  await Promise.all(Array.from({length: limit}, worker))
  return results
}

test('every corpus project deploys and answers every request as wrangler’s own build of it does', {timeout: 900_000}, async () => {
  const projects = readdirSync(CORPUS, {withFileTypes: true})
    .filter((entry) => entry.isDirectory() && entry.name !== 'node_modules')
    .map((entry) => entry.name)
    .sort()
  expect(projects.length).toBeGreaterThanOrEqual(30)
  expect(Object.keys(REQUESTS).sort()).toEqual(projects)
  const outcomes = await pool(projects, 4, compare)
  console.log(outcomes.map(({project, packages, result}) => `| ${project} | ${packages.join(', ') || '—'} | ${result} |`).join('\n'))
  expect(outcomes.filter((outcome) => outcome.result !== 'same answers').map(({project, result, detail}) => ({project, result, detail}))).toEqual(
    Object.entries(KNOWN_DIFFERENCES).map(([project, detail]) => ({project, result: 'different answers', detail: expect.stringMatching(detail)})),
  )
})
