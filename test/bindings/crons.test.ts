// Cron triggers (wrangler's triggers.crons) against a real edge host running real workerd, under both
// host.code_loading modes, on an injected clock the test moves: scheduled() runs with the cron and
// the scheduledTime of each occurrence; occurrences missed while the host was down or fenced run
// once when it can run them again, never as a burst; a redeploy with another schedule follows the new
// one; bad expressions are refused in one line. The Worker records its runs in KV.
import {existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {type CliResult, expectDeployRefusals, runCli, setUpKit, writeProject} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'

const WORKER = `export default {
  async fetch(request, env) {
    const {keys} = await env.RUNS.list();
    return Response.json(keys.map((key) => key.name));
  },
  async scheduled(controller, env) {
    await env.RUNS.put(new Date(controller.scheduledTime).toISOString() + " " + controller.cron, controller.type ?? "");
  },
};`

function wranglerToml(crons: string[]): string {
  return [
    'name = "cron"',
    'main = "worker.js"',
    'compatibility_date = "2025-06-01"',
    `triggers = {crons = [${crons.map((cron) => JSON.stringify(cron)).join(', ')}]}`,
    '[[kv_namespaces]]',
    'binding = "RUNS"',
  ].join('\n')
}

describe.each(['restart', 'loader'] as const)('code_loading = %s', (codeLoading) => {
  const root = mkdtempSync(path.join(tmpdir(), `edgeworkers-crons-${codeLoading}-`))
  const dataDir = path.join(root, 'kit')
  const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir])
  const logFile = path.join(root, 'workers.log')
  let now = Date.parse('2030-01-01T00:00:30Z')
  let host: TestHost

  beforeAll(async () => {
    host = await startTestHost({settings: {shards: 1, code_loading: codeLoading, worker_log_file: logFile}, cronClock: () => now})
    await setUpKit(cli, host, [['department', 'create', 'acme', 'jobs', '--id', 'jobs']])
  }, 120_000)
  afterAll(async () => {
    await host?.stop()
    rmSync(root, {recursive: true, force: true})
  })

  const project = (name: string, files: Record<string, string | Buffer>): string => writeProject(root, name, files)

  async function deploy(crons: string[]): Promise<string> {
    const dir = project(`cron-${crons.length}`, {'wrangler.toml': wranglerToml(crons), 'worker.js': WORKER})
    expect(JSON.parse((await cli('deploy', dir, '--dry-run', '--json')).stdout).bindings.crons).toEqual(crons)
    const result = await cli('deploy', dir, '--department', 'jobs', '--json')
    expect({code: result.code, stderr: result.stderr}).toEqual({code: 0, stderr: expect.any(String)})
    return (JSON.parse(result.stdout) as {url: string}).url
  }

  async function runsAfterTick(url: string, at: string): Promise<string[]> {
    now = Date.parse(at)
    await host.host.runDueCronTriggers()
    const response = await request(url)
    expect(response.statusCode).toBe(200)
    return (await response.body.json()) as string[]
  }

  test('scheduled() runs on each occurrence; misses while down or fenced run once; a redeploy follows the new schedule', {timeout: 240_000}, async () => {
    const url = await deploy(['* * * * *', '0 12 * * MON'])
    // Nothing before the deploy runs: the first look starts each trigger from now.
    expect(await runsAfterTick(url, '2030-01-01T00:00:40Z')).toEqual([])
    expect(await runsAfterTick(url, '2030-01-01T00:01:05Z')).toEqual(['2030-01-01T00:01:00.000Z * * * * *'])
    // The same minute again: nothing new.
    expect(await runsAfterTick(url, '2030-01-01T00:01:55Z')).toEqual(['2030-01-01T00:01:00.000Z * * * * *'])

    // Ten minutes down: one run, for the latest occurrence.
    now = Date.parse('2030-01-01T00:11:20Z')
    await host.restart()
    expect(await runsAfterTick(url, '2030-01-01T00:11:20Z')).toEqual(['2030-01-01T00:01:00.000Z * * * * *', '2030-01-01T00:11:00.000Z * * * * *'])

    // Fenced: nothing runs; lifted: the missed minutes run once.
    expect((await cli('fence', 'begin', '--reason', 'test')).code).toBe(0)
    expect(await runsAfterTick(url, '2030-01-01T00:13:10Z')).toHaveLength(2)
    // The clock moves on before the lift: the host's own ticks may run the trigger as soon as it is lifted.
    now = Date.parse('2030-01-01T00:14:10Z')
    expect((await cli('fence', 'end')).code).toBe(0)
    expect(await runsAfterTick(url, '2030-01-01T00:14:10Z')).toEqual([
      '2030-01-01T00:01:00.000Z * * * * *',
      '2030-01-01T00:11:00.000Z * * * * *',
      '2030-01-01T00:14:00.000Z * * * * *',
    ])

    // 2030-01-07 is a Monday (Cloudflare's MON): the weekly trigger, once, for its latest occurrence.
    const weekLater = await runsAfterTick(url, '2030-01-07T12:00:30Z')
    expect(weekLater.filter((run) => run.endsWith('MON'))).toEqual(['2030-01-07T12:00:00.000Z 0 12 * * MON'])
    expect(weekLater.filter((run) => run.endsWith('* * * * *'))).toHaveLength(4)

    // Redeployed with one trigger every five minutes: only it runs from now on.
    await deploy(['*/5 * * * *'])
    expect(await runsAfterTick(url, '2030-01-07T12:01:00Z')).toHaveLength(5)
    const later = await runsAfterTick(url, '2030-01-07T12:05:01Z')
    expect([later.length, later.at(-1)]).toEqual([6, '2030-01-07T12:05:00.000Z */5 * * * *'])

    // Each run is a Worker event like any invocation: in the Worker log (and `tail`) as SCHEDULED <cron>.
    const scheduledEvents = () =>
      (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '')
        .split('\n')
        .filter((line) => line.includes('"SCHEDULED"'))
        .map((line) => JSON.parse(line) as {method: string; path: string; outcome: string})
    await expect
      .poll(() => scheduledEvents().find((event) => event.path === '*/5 * * * *'), {timeout: 10_000})
      .toMatchObject({method: 'SCHEDULED', outcome: 'ok'})
  })

  // Refused at build, before the host is asked: one code-loading mode is enough.
  if (codeLoading === 'restart')
    test('an expression Cloudflare would not run is refused in one line, exit 2, nothing deployed', async () => {
      const bad = [
        ['minute', '61 * * * *', 'Invalid value for minute: 61'],
        ['four', '* * * *', 'it must have five fields'],
        ['six', '0 * * * * *', 'it must have five fields'],
        ['never', '0 0 31 2 *', 'it never fires'],
      ] as const
      await expectDeployRefusals(cli, 'jobs', [
        ...bad.map(([name, cron, message]) => ({
          name,
          dir: project(name, {'wrangler.toml': wranglerToml([cron]), 'worker.js': WORKER}),
          message: `wrangler.toml: key "triggers.crons[0]" "${cron}" is not a cron expression Cloudflare runs: ${message}`,
        })),
        {
          name: 'twice',
          dir: project('twice', {'wrangler.toml': wranglerToml(['* * * * *', '* * * * *']), 'worker.js': WORKER}),
          message: 'lists a cron expression twice',
        },
      ])
    })
})
