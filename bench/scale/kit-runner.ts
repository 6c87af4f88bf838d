// One kit runner process of bench/scale: opens the store, says `ready`, waits for `go` on stdin, then
// runs one recovery pass as `edgeworkers reconcile --lane recovery` does — claims of
// `recovery.batch_size` rows, the next claimed while the last rows run, up to
// `reconcile.deploy_concurrency` rows at once — with a deploy task that runs under the lease the
// claim took and settles the row (a no-op job), and prints how many rows it completed and the CPU
// time the drain took.
// With EDGEWORKERS_BENCH_CPU_PROFILE=<file> it writes a V8 CPU profile of the drain alone (from `go`
// to the pass's end; start-up and module loading left out) to that file (bench/scale/profile.ts).
// Usage: node --import tsx bench/scale/kit-runner.ts <store-url> <data-dir> <scope> <concurrency>
import {once} from 'node:events'
import {writeFileSync} from 'node:fs'
import {Session} from 'node:inspector/promises'
import {createInterface} from 'node:readline'
import {FileArtifactStore} from '../../src/artifacts/store.js'
import {settingsSchema} from '../../src/config/schema.js'
import {runnerIdentity, silentLogger} from '../../src/engine/context.js'
import {runPass} from '../../src/engine/pass/index.js'
import type {EdgeProvider} from '../../src/provider/types.js'
import {openStore} from '../../src/store/index.js'
import {leaseAndSettle} from '../support/passes.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'

const [url, dataDir, scope, concurrency] = process.argv.slice(2) as [string, string, string, string]
const settings = settingsSchema.parse({
  data_dir: dataDir,
  // One connection per row at once, and one for the claim; a patient connect on a loaded machine.
  store: {url, postgres_pool_max: Number(concurrency) + 1, connect_timeout_ms: 60_000},
  reconcile: {lane_budget_seconds: 3_600, deploy_concurrency: Number(concurrency)},
})
const store = await openStore(settings)
const engine = {
  store,
  settings,
  artifacts: await FileArtifactStore.open(dataDir),
  log: silentLogger,
  owner: runnerIdentity(),
  hosts: onPremHosts,
  resolveProvider: async () => ({status: 'ready' as const, scope, provider: {scope} as EdgeProvider}),
}
const lines = createInterface({input: process.stdin})
process.stdout.write('ready\n')
await once(lines, 'line')
lines.close()
const profileFile = process.env.EDGEWORKERS_BENCH_CPU_PROFILE
const profiler = profileFile ? new Session() : undefined
if (profiler) {
  profiler.connect()
  await profiler.post('Profiler.enable')
  await profiler.post('Profiler.start')
}
const cpuBefore = process.cpuUsage()
const result = await runPass(engine, {lanes: ['recovery'], dispatchDeploy: leaseAndSettle(scope)})
const cpu = process.cpuUsage(cpuBefore)
if (profiler && profileFile) writeFileSync(profileFile, JSON.stringify((await profiler.post('Profiler.stop')).profile))
await store.close()
const lane = result.lanes[0]!
process.stdout.write(`${JSON.stringify({completed: lane.completed, error: lane.error ?? null, cpuMicros: cpu.user + cpu.system})}\n`)
