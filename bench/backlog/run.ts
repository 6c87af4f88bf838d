// Deploy backlog drain rate: WORKERS Workers × VERSIONS queued versions each (`deploy --no-wait`,
// so every row is the passes'), drained by 1 and by 16 `edgeworkers reconcile --lane recovery`
// processes started together (the built CLI, each in --watch mode, one pass per second), on a real
// edge host (startBenchHost: in-process, 2 workerd shards), on each store, `recovery.batch_size` 5 so
// a backlog this small still spreads over the passes. Two times: wall, from the processes' start
// until no deploy row is pending or leased (includes starting 16 CLIs); and drain, from the first row
// settled to the last (the rows' updated_at). Then every Worker must serve its newest version, every
// row must be terminal with exactly one deploy audit row, and no release may be uploaded twice.
//
//   npm run build && node --import tsx bench/backlog/run.ts [--workers 20] [--versions 5]
//
// Prints Markdown for BENCHMARKS.md.
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import type {PairingResult} from '../../src/provider/types.js'
import {openStore, type Backend, type Store} from '../../src/store/index.js'
import {startBenchHost, type BenchHost} from '../support/host.js'
import {expectEachRowSettledOnce, expectNewestServed, HostCounter, queueBacklog} from '../support/deploy-backlog.js'
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

async function drain(host: BenchHost, pairing: PairingResult, uploads: HostCounter, backend: Backend, url: string, passes: number): Promise<Figure> {
  const dataDir = path.join(workDir, `${backend}-${passes}`)
  mkdirSync(dataDir, {recursive: true})
  const store: Store = await openStore(settingsSchema.parse({data_dir: dataDir, store: {url}}))
  const children: ChildProcess[] = []
  try {
    await store.migrate()
    await store.kit.savePairing(pairing)
    const newest = await queueBacklog(store, {dataDir, projectsDir: workDir, url, label: `${backend}-${passes}`, workers: WORKERS, versions: VERSIONS})
    const uploadsBefore = uploads.uploads
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
    await expectNewestServed(store, host.publicUrl, newest)
    await expectEachRowSettledOnce(store, uploads.perRelease)
    const settled = (await store.outbox.list({operation: 'deploy', limit: 1_000_000})).map((row) => row.updated_at)
    const drainSeconds = (Math.max(...settled) - Math.min(...settled)) / 1000
    const figure = {backend, passes, rows: WORKERS * VERSIONS, uploads: uploads.uploads - uploadsBefore, seconds, drainSeconds}
    log(`${backend}, ${passes} passes: ${figure.rows} rows in ${seconds.toFixed(1)} s (drain ${drainSeconds.toFixed(1)} s), ${figure.uploads} uploads`)
    return figure
  } finally {
    for (const child of children) child.kill('SIGTERM')
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)))))
    await store.close()
  }
}

const uploads = new HostCounter()
const host = await startBenchHost({onLog: uploads.record})
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
