// Cron triggers: a Worker with a `* * * * *` trigger on a real host, run on the wall clock for
// MINUTES minutes. Its scheduled() writes each run (scheduledTime → the Worker's clock at the start
// of the run) to its KV namespace; at the end every whole minute of the run must have fired exactly
// once, and each run's lag (its start − the minute) must be within 1 s. Prints the lag percentiles.
//
//   npm run build && node --import tsx bench/bindings/cron.ts [--minutes 10]
import {parseArgs} from 'node:util'
import {request} from 'undici'
import {moduleUpload, scriptNameFor} from '../support/fixtures.js'
import {pairHost, startBenchHost} from '../support/host.js'
import {log, machineLoad, percentile} from '../support/stats.js'

const {values} = parseArgs({options: {minutes: {type: 'string', default: '10'}}})
const MINUTES = Number(values.minutes)
const MINUTE_MS = 60_000
const WITHIN_MS = 1000

const WORKER = `export default {
  async scheduled(controller, env) {
    await env.RUNS.put(String(controller.scheduledTime), JSON.stringify({cron: controller.cron, startedAt: Date.now()}));
  },
  async fetch(request, env) {
    const runs = [];
    for (let cursor; ; ) {
      const page = await env.RUNS.list({cursor});
      for (const key of page.keys) runs.push({scheduledTime: Number(key.name), ...(await env.RUNS.get(key.name, "json"))});
      if (page.list_complete) break;
      cursor = page.cursor;
    }
    return Response.json(runs);
  },
};`

interface Run {
  scheduledTime: number
  cron: string
  startedAt: number
}

const host = await startBenchHost({settings: {shards: 1}})
try {
  const client = host.client(await pairHost(host.adminUrl, host.pairingCode!))
  const script = scriptNameFor('bench-bindings-cron')
  await client.deploy(script, {
    ...moduleUpload(WORKER, [{type: 'kv_namespace', name: 'RUNS', namespaceId: 'cron-runs'}]),
    crons: ['* * * * *'],
  })
  // A trigger seen for the first time starts from now: the first minute it can fire is the next one.
  const first = Math.ceil(Date.now() / MINUTE_MS) * MINUTE_MS
  const last = first + (MINUTES - 1) * MINUTE_MS
  log(`cron: ${MINUTES} minute(s), ${new Date(first).toISOString()} … ${new Date(last).toISOString()}`)
  // The last minute's run, then a few seconds for a stray duplicate to show.
  await new Promise((resolve) => setTimeout(resolve, last + 5_000 - Date.now()))
  const response = await request(`${host.publicUrl}/${script}/`)
  const runs = ((await response.body.json()) as Run[]).filter((run) => run.scheduledTime >= first && run.scheduledTime <= last)
  const expected = Array.from({length: MINUTES}, (_, index) => first + index * MINUTE_MS)
  const byMinute = new Map<number, Run[]>(expected.map((minute) => [minute, []]))
  for (const run of runs) byMinute.get(run.scheduledTime)?.push(run)
  const missed = expected.filter((minute) => byMinute.get(minute)!.length === 0).length
  const twice = expected.filter((minute) => byMinute.get(minute)!.length > 1).length
  const offMinute = runs.filter((run) => !byMinute.has(run.scheduledTime)).length
  const lags = runs.map((run) => run.startedAt - run.scheduledTime)
  const late = lags.filter((lag) => lag > WITHIN_MS || lag < 0).length
  const ok = missed === 0 && twice === 0 && offMinute === 0 && late === 0
  console.log(
    `cron * * * * * over ${MINUTES} min: ${runs.length}/${MINUTES} minutes fired, missed ${missed}, twice ${twice}, off-minute ${offMinute}, ` +
      `outside 0–${WITHIN_MS} ms ${late}; lag p50 ${percentile(lags, 50)} ms, max ${Math.max(...lags)} ms — ${ok ? 'PASS' : 'FAIL'} (${machineLoad()})`,
  )
  process.exitCode = ok ? 0 : 1
} finally {
  await host.stop()
}
