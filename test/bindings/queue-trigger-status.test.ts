// `edgeworkers queues list|show` and `triggers list` against a real edge host running real workerd:
// the counts a queue's store holds (delayed messages, dead letters), its consumer's settings, and
// each cron trigger's last run, outcome and next run on the host's (injected) clock; an unknown
// department or queue is refused in one line with exit code 5.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {type CliResult, runCli, setUpKit, writeProject} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'

const WORKER = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    await env.JOBS.send(url.searchParams.get("body"), {contentType: "text", delaySeconds: Number(url.searchParams.get("delay") ?? 0)});
    return new Response("sent");
  },
  async queue(batch) {
    for (const message of batch.messages) if (message.body === "poison") message.retry();
  },
  async scheduled(controller) {
    if (controller.cron === "0 * * * *") throw new Error("the hourly job failed");
  },
};`

const WRANGLER_TOML = [
  'name = "ops"',
  'main = "worker.js"',
  'compatibility_date = "2025-06-01"',
  'triggers = {crons = ["*/5 * * * *", "0 * * * *"]}',
  '[[queues.producers]]',
  'binding = "JOBS"',
  'queue = "jobs"',
  '[[queues.consumers]]',
  'queue = "jobs"',
  'max_batch_size = 5',
  'max_batch_timeout = 1',
  'max_retries = 0',
  'dead_letter_queue = "jobs-dead"',
].join('\n')

describe('queues and triggers on the host', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-queue-trigger-status-'))
  const dataDir = path.join(root, 'kit')
  const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir])
  let now = Date.parse('2030-01-01T00:00:30Z')
  let host: TestHost
  let url: string

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1}, cronClock: () => now})
    await setUpKit(cli, host, [['department', 'create', 'acme', 'ops', '--id', 'ops']])
    const dir = writeProject(root, 'ops', {'wrangler.toml': WRANGLER_TOML, 'worker.js': WORKER})
    const deployed = await cli('deploy', dir, '--department', 'ops', '--json')
    expect({code: deployed.code, stderr: deployed.stderr}).toEqual({code: 0, stderr: expect.any(String)})
    url = (JSON.parse(deployed.stdout) as {url: string}).url
  }, 120_000)
  afterAll(async () => {
    await host?.stop()
    rmSync(root, {recursive: true, force: true})
  })

  const send = async (body: string, delay = 0) => {
    const response = await request(`${url}?body=${body}&delay=${delay}`)
    expect([response.statusCode, await response.body.text()]).toEqual([200, 'sent'])
  }
  const queues = async (...args: string[]) => {
    const result = await cli('queues', 'list', ...args, '--json')
    expect({code: result.code, stderr: result.stderr}).toEqual({code: 0, stderr: ''})
    return JSON.parse(result.stdout) as {queues: Array<Record<string, unknown>>}
  }

  test('queues list|show report the counts and the consumer; unknown ones are refused', {timeout: 120_000}, async () => {
    expect((await queues('ops')).queues.map((queue) => [queue.queue, queue.backlog])).toEqual([
      ['jobs', 0],
      ['jobs-dead', 0],
    ])
    await send('later', 3600)
    await send('later', 3600)
    await send('poison')
    // The poison message is retried past max_retries 0: moved to the dead-letter queue.
    await expect.poll(async () => (await queues()).queues.find((queue) => queue.queue === 'jobs')?.deadLettered, {timeout: 30_000, interval: 500}).toBe(1)
    const {queues: listed} = await queues()
    expect(listed).toEqual([
      {
        department: 'ops',
        script: expect.stringMatching(/^dw-/),
        queue: 'jobs',
        producers: ['JOBS'],
        consumer: {queue: 'jobs', maxBatchSize: 5, maxBatchTimeout: 1, maxRetries: 0, retryDelay: 0, deadLetterQueue: 'jobs-dead', maxConcurrency: 1},
        backlog: 2,
        inFlight: 0,
        delayed: 2,
        deadLettered: 1,
        oldestMessageAgeMs: expect.any(Number),
      },
      {
        department: 'ops',
        script: expect.stringMatching(/^dw-/),
        queue: 'jobs-dead',
        producers: [],
        consumer: null,
        backlog: 1,
        inFlight: 0,
        delayed: 0,
        deadLettered: 0,
        oldestMessageAgeMs: expect.any(Number),
      },
    ])

    const shown = await cli('queues', 'show', 'ops', 'jobs', '--json')
    expect(shown.code).toBe(0)
    expect(JSON.parse(shown.stdout)).toEqual({...listed[0], oldestMessageAgeMs: expect.any(Number)})
    const text = await cli('queues', 'show', 'ops', 'jobs')
    expect(text.stdout).toContain('backlog        2 (0 in flight, 2 delayed)')
    expect(text.stdout).toContain('dead letters   jobs-dead')

    const unknownQueue = await cli('queues', 'show', 'ops', 'nope')
    expect([unknownQueue.code, unknownQueue.stderr.trim().split('\n')]).toEqual([
      5,
      [expect.stringContaining('has no queue "nope" (its queues: jobs, jobs-dead)')],
    ])
    const unknownDepartment = await cli('queues', 'list', 'nobody')
    expect([unknownDepartment.code, unknownDepartment.stderr.trim().split('\n')]).toEqual([5, [expect.stringContaining('Worker nobody not found')]])
  })

  test('triggers list shows each cron’s last run, outcome and next run', {timeout: 120_000}, async () => {
    const triggers = async (...args: string[]) => {
      const result = await cli('triggers', 'list', ...args, '--json')
      expect({code: result.code, stderr: result.stderr}).toEqual({code: 0, stderr: ''})
      return (JSON.parse(result.stdout) as {triggers: Array<Record<string, unknown>>}).triggers
    }
    await host.host.runDueCronTriggers()
    expect(await triggers('ops')).toEqual([
      {
        department: 'ops',
        script: expect.stringMatching(/^dw-/),
        cron: '*/5 * * * *',
        lastRunAt: null,
        lastOutcome: null,
        nextRunAt: Date.parse('2030-01-01T00:05:00Z'),
      },
      {
        department: 'ops',
        script: expect.stringMatching(/^dw-/),
        cron: '0 * * * *',
        lastRunAt: null,
        lastOutcome: null,
        nextRunAt: Date.parse('2030-01-01T01:00:00Z'),
      },
    ])
    now = Date.parse('2030-01-01T01:00:10Z')
    await host.host.runDueCronTriggers()
    expect((await triggers()).map(({cron, lastRunAt, lastOutcome, nextRunAt}) => ({cron, lastRunAt, lastOutcome, nextRunAt}))).toEqual([
      {cron: '*/5 * * * *', lastRunAt: Date.parse('2030-01-01T01:00:00Z'), lastOutcome: 'ok', nextRunAt: Date.parse('2030-01-01T01:05:00Z')},
      {cron: '0 * * * *', lastRunAt: Date.parse('2030-01-01T01:00:00Z'), lastOutcome: 'exception', nextRunAt: Date.parse('2030-01-01T02:00:00Z')},
    ])
    const text = await cli('triggers', 'list', 'ops')
    expect(text.stdout).toMatch(/0 \* \* \* \* +2030-01-01T01:00:00.000Z +exception +2030-01-01T02:00:00.000Z/)
    const unknown = await cli('triggers', 'list', 'nobody')
    expect([unknown.code, unknown.stderr.trim().split('\n')]).toEqual([5, [expect.stringContaining('Worker nobody not found')]])
  })
})
