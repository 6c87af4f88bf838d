// Deploy backlog drain rate: WORKERS Workers × VERSIONS queued versions each (`deploy --no-wait`,
// so every row is the passes'), drained by 1 and by 16 `edgeworkers reconcile --lane recovery`
// processes started together (the built CLI, each in --watch mode, one pass per second), on a real
// edge host (startTestHost: in-process, 2 workerd shards), on each store, `recovery.batch_size` 5 so
// a backlog this small still spreads over the passes. Two times: wall, from the processes' start
// until no deploy row is pending or leased (includes starting 16 CLIs); and drain, from the first row
// settled to the last (the rows' updated_at). Then every Worker must serve its newest version, every
// row must be terminal with exactly one deploy audit row, and no release may be uploaded twice.
//
//   npm run build && node --import tsx bench/backlog/run.ts [--workers 20] [--versions 5]
//
// Prints Markdown for BENCHMARKS.md.
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine} from '../../src/engine/context.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {pairWithHost, type PairingResult} from '../../src/provider/onprem/pairing.js'
import {DEPLOY_AUDIT_ACTIONS, openStore, type Backend, type Store} from '../../src/store/index.js'
import {startTestHost, type TestHost} from '../../test/support/host.js'
import {onEachBackend} from '../support/passes.js'
import {log} from '../support/stats.js'

const {values: options} = parseArgs({options: {workers: {type: 'string', default: '20'}, versions: {type: 'string', default: '5'}}})
const WORKERS = Number(options.workers)
const VERSIONS = Number(options.versions)
const PASSES = [1, 16]
const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../bin/run.js')
const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-backlog-'))

interface Figure {
  backend: Backend
  passes: number
  rows: number
  uploads: number
  seconds: number
  drainSeconds: number
}

function project(text: string): string {
  const dir = mkdtempSync(path.join(workDir, 'project-'))
  writeFileSync(
    path.join(dir, 'edgeworker.json'),
    JSON.stringify({
      name: 'backlog',
      main: 'index.js',
      modules: ['index.js'],
      compatibilityDate: '2026-11-01',
      builderPolicy: 'department-worker-project-v2.9',
      staticData: {},
      dependencies: {},
    }),
  )
  writeFileSync(path.join(dir, 'index.js'), `export default { fetch() { return new Response(${JSON.stringify(text)}) } }\n`)
  return dir
}

/** Queues VERSIONS versions of WORKERS Workers (`deploy --no-wait`), returns department → newest text. */
async function queueBacklog(store: Store, dataDir: string, url: string, label: string): Promise<Map<string, string>> {
  const engine = await createEngine(store, settingsSchema.parse({data_dir: dataDir, store: {url}}))
  await store.tenants.createCompany({id: label, name: label})
  const newest = new Map<string, string>()
  for (let w = 0; w < WORKERS; w++) await store.tenants.createDepartment({id: `${label}-${w}`, company_id: label, name: `${w}`})
  for (let v = 0; v < VERSIONS; v++) {
    for (let w = 0; w < WORKERS; w++) {
      const department = `${label}-${w}`
      const text = `${department} v${v}`
      const outcome = await deployWorker(engine, {projectDir: project(text), departmentId: department, wait: false})
      if (outcome.state !== 'pending') throw new Error(`enqueue of ${text}: ${outcome.state}`)
      newest.set(department, text)
    }
  }
  return newest
}

async function drain(
  host: TestHost,
  pairing: PairingResult,
  uploads: {count: number; perRelease: Map<string, number>},
  backend: Backend,
  url: string,
  passes: number,
): Promise<Figure> {
  const dataDir = path.join(workDir, `${backend}-${passes}`)
  mkdirSync(dataDir, {recursive: true})
  const store: Store = await openStore(settingsSchema.parse({data_dir: dataDir, store: {url}}))
  const children: ChildProcess[] = []
  try {
    await store.migrate()
    await store.kit.savePairing(pairing)
    const newest = await queueBacklog(store, dataDir, url, `${backend}-${passes}`)
    const uploadsBefore = uploads.count
    const open = async () =>
      (await store.outbox.list({operation: 'deploy', status: 'pending', limit: 1})).length +
        (await store.outbox.list({operation: 'deploy', status: 'leased', limit: 1})).length >
      0
    const started = performance.now()
    for (let i = 0; i < passes; i++) {
      const child = spawn(process.execPath, [CLI, 'reconcile', '--lane', 'recovery', '--watch', '--interval', '1'], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: {
          ...process.env,
          EDGEWORKERS_CONFIG: undefined,
          EDGEWORKERS_DATA_DIR: dataDir,
          EDGEWORKERS_STORE__URL: url,
          EDGEWORKERS_LOG_LEVEL: 'warn',
          EDGEWORKERS_RECOVERY__BATCH_SIZE: '5',
        },
      })
      child.stderr!.on('data', (chunk: Buffer) => {
        if (/deadlock|failed:/i.test(chunk.toString())) log(`${backend} ${passes} passes: ${chunk.toString().trim()}`)
      })
      children.push(child)
    }
    while (await open()) await new Promise((resolve) => setTimeout(resolve, 100))
    const seconds = (performance.now() - started) / 1000
    for (const [department, text] of newest) {
      const worker = await store.deployments.workerOfDepartment(department)
      const body = await (await fetch(`${host.publicUrl}/${worker!.script_name}/`)).text()
      if (body !== text) throw new Error(`${department} serves ${JSON.stringify(body)}, not its newest ${JSON.stringify(text)}`)
    }
    await expectEachRowSettledOnce(store, uploads.perRelease)
    const settled = (await store.outbox.list({operation: 'deploy', limit: 100_000})).map((row) => row.updated_at)
    const drainSeconds = (Math.max(...settled) - Math.min(...settled)) / 1000
    const figure = {backend, passes, rows: WORKERS * VERSIONS, uploads: uploads.count - uploadsBefore, seconds, drainSeconds}
    log(`${backend}, ${passes} passes: ${figure.rows} rows in ${seconds.toFixed(1)} s (drain ${drainSeconds.toFixed(1)} s), ${figure.uploads} uploads`)
    return figure
  } finally {
    for (const child of children) child.kill('SIGTERM')
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)))))
    await store.close()
  }
}

/**
 * Every row terminal and processed exactly once: completed with one `deployed` audit row, or yielded
 * (`cancelled`) with one `deploy_superseded` audit row; and no release uploaded twice.
 */
async function expectEachRowSettledOnce(store: Store, perRelease: Map<string, number>): Promise<void> {
  const rows = await store.outbox.list({operation: 'deploy', limit: 100_000})
  const audits = new Map<string, string[]>()
  for (const action of Object.values(DEPLOY_AUDIT_ACTIONS)) {
    for (const audit of await store.audit.list({action, limit: 100_000}))
      audits.set(String(audit.facts.outbox_id), [...(audits.get(String(audit.facts.outbox_id)) ?? []), action])
  }
  for (const row of rows) {
    const expected = row.status === 'completed' ? DEPLOY_AUDIT_ACTIONS.deployed : row.status === 'cancelled' ? DEPLOY_AUDIT_ACTIONS.superseded : null
    const actual = audits.get(row.id) ?? []
    if (!expected || actual.length !== 1 || actual[0] !== expected)
      throw new Error(`row ${row.id} ended ${row.status} with audit rows ${JSON.stringify(actual)}`)
  }
  const twice = [...perRelease].filter(([, count]) => count > 1)
  if (twice.length > 0) throw new Error(`uploaded more than once: ${JSON.stringify(twice)}`)
}

const uploads = {count: 0, perRelease: new Map<string, number>()}
const host = await startTestHost({
  onLog: (entry) => {
    if (entry.msg !== 'script uploaded') return
    uploads.count++
    const release = `${String(entry.script)}@${String(entry.releaseGeneration)}`
    uploads.perRelease.set(release, (uploads.perRelease.get(release) ?? 0) + 1)
  },
})
try {
  const pairing = await pairWithHost(host.adminUrl, host.pairingCode!, 10_000)
  const figures: Figure[] = []
  for (const passes of PASSES) {
    figures.push(...(await onEachBackend(workDir, `backlog_${passes}`, (backend, url) => drain(host, pairing, uploads, backend, url, passes))))
  }
  const load = os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' / ')
  console.log(
    `\n${new Date().toISOString()}, ${os.cpus().length} vCPU, load average ${load}; ${WORKERS} Workers × ${VERSIONS} versions = ${WORKERS * VERSIONS} rows\n`,
  )
  console.log('| store | passes | rows | uploads | wall s | drain s | rows/s (drain) |')
  console.log('|---|---|---|---|---|---|---|')
  for (const figure of figures.sort((a, b) => a.backend.localeCompare(b.backend) || a.passes - b.passes)) {
    const row = [
      figure.backend,
      figure.passes,
      figure.rows,
      figure.uploads,
      figure.seconds.toFixed(1),
      figure.drainSeconds.toFixed(1),
      (figure.rows / figure.drainSeconds).toFixed(1),
    ]
    console.log(`| ${row.join(' | ')} |`)
  }
} finally {
  await host.stop()
  rmSync(workDir, {recursive: true, force: true})
}
