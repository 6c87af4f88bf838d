// `edgeworkers status` against a real edge host running real workerd: a queue holding
// status.queue_backlog_threshold messages or more, and a cron trigger whose last run failed, need
// attention (exit 13), named by department; below the threshold and with runs ending ok, nothing does.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import type {StatusSnapshot} from '../../src/engine/status/snapshot.js'
import {type CliResult, runCli, setUpKit, writeProject} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'

const WORKER = `export default {
  async fetch(request, env) {
    await env.JOBS.send("later", {contentType: "text", delaySeconds: 3600});
    return new Response("sent");
  },
  async queue() {},
  async scheduled(controller) {
    if (controller.cron === "0 * * * *") throw new Error("the hourly job failed");
  },
};`

const WRANGLER_TOML = [
  'name = "watched"',
  'main = "worker.js"',
  'compatibility_date = "2025-06-01"',
  'triggers = {crons = ["0 * * * *"]}',
  '[[queues.producers]]',
  'binding = "JOBS"',
  'queue = "jobs"',
  '[[queues.consumers]]',
  'queue = "jobs"',
].join('\n')

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-status-bindings-'))
const dataDir = path.join(root, 'kit')
const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir], {EDGEWORKERS_STATUS__QUEUE_BACKLOG_THRESHOLD: '3'})
let now = Date.parse('2030-01-01T00:00:30Z')
let host: TestHost
let url: string

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 1}, cronClock: () => now})
  await setUpKit(cli, host, [['department', 'create', 'acme', 'watched', '--id', 'watched']])
  const deployed = await cli(
    'deploy',
    writeProject(root, 'watched', {'wrangler.toml': WRANGLER_TOML, 'worker.js': WORKER}),
    '--department',
    'watched',
    '--json',
  )
  expect(deployed.code).toBe(0)
  url = (JSON.parse(deployed.stdout) as {url: string}).url
}, 120_000)
afterAll(async () => {
  await host?.stop()
  rmSync(root, {recursive: true, force: true})
})

async function snapshot(): Promise<{code: number | null; snapshot: StatusSnapshot}> {
  const result = await cli('status', '--json')
  return {code: result.code, snapshot: JSON.parse(result.stdout) as StatusSnapshot}
}

test('a queue backlog over the threshold and a failing cron need attention', {timeout: 120_000}, async () => {
  const send = async () => expect((await request(url)).statusCode).toBe(200)
  await send()
  await send()
  await host.host.runDueCronTriggers()
  const calm = await snapshot()
  expect([calm.code, calm.snapshot.attention, calm.snapshot.bindings]).toEqual([0, [], {backlogged: [], failingCrons: [], threshold: 3}])

  await send()
  now = Date.parse('2030-01-01T01:00:05Z')
  await host.host.runDueCronTriggers()
  const alarmed = await snapshot()
  expect(alarmed.code).toBe(13)
  expect(alarmed.snapshot.attention).toEqual(['queue watched/jobs: 3 messages waiting (threshold 3)', 'cron watched "0 * * * *": last run exception'])
  const text = await cli('status')
  expect(text.stdout).toMatch(/^attention: +queue watched\/jobs: 3 messages waiting \(threshold 3\); cron watched "0 \* \* \* \*": last run exception$/m)
})
