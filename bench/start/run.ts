// CLI start-up: whole processes, spawn to exit, each alternating with `node -e 0` in the same run so
// both see the same machine. Measured: `--version`, `--help`, `reconcile` with nothing to do on a
// SQLite store and on a PostgreSQL store (migrated, empty, unpaired: no host to ask), `status --json`
// and `worker list --json` (SQLite). Wall time from Node around the spawn; CPU (user+sys) of the
// child from /usr/bin/time. Medians of --rounds rounds, and each median's ratio to node's.
//
//   npm run build && node --import tsx bench/start/run.ts [--rounds 15] [--bin path/to/bin/run.js]
//
// --bin times another build of the CLI (another checkout's bin/run.js) with this run's fixtures.
// PostgreSQL: EDGEWORKERS_BENCH_PG_URL (an admin URL), else an embedded server. Prints a Markdown
// table for BENCHMARKS.md.
import {execFile} from 'node:child_process'
import {existsSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'
import {createDatabase, dropDatabase, postgresServer} from '../support/store-baseline.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({options: {rounds: {type: 'string', default: '15'}, bin: {type: 'string'}}})
const ROUNDS = Number(options.rounds)
const repoRoot = path.resolve(fileURLToPath(new URL('../..', import.meta.url)))
const BIN = path.resolve(options.bin ?? path.join(repoRoot, 'bin/run.js'))
const TIME = '/usr/bin/time'
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-start-'))

interface Measured {
  name: string
  args: string[]
  env?: Record<string, string>
  /** `status` exits 13 (attention) on a store with no paired host. */
  exitCode?: number
}

interface Sample {
  wallMs: number
  cpuMs: number
}

async function main(): Promise<void> {
  if (!existsSync(BIN) || !existsSync(path.join(path.dirname(BIN), '..', 'oclif.manifest.json')))
    throw new Error(`no built CLI at ${BIN}: run \`npm run build\` first`)
  if (!existsSync(TIME)) throw new Error(`${TIME} is needed for the child's CPU time`)
  const postgres = await postgresServer()
  try {
    const sqliteDir = await migratedDataDir('sqlite', path.join(workDir, 'sqlite'))
    const postgresUrl = await createDatabase(postgres.adminUrl, 'edgeworkers_bench_start')
    const postgresDir = await migratedDataDir(postgresUrl, path.join(workDir, 'postgres'))
    const cli = (name: string, args: string[], extra: Partial<Measured> = {}): Measured => ({name, args: [BIN, ...args], ...extra})
    const commands: Measured[] = [
      cli('--version', ['--version']),
      cli('--help', ['--help']),
      cli('reconcile (SQLite)', ['reconcile', '--data-dir', sqliteDir]),
      cli('reconcile (PostgreSQL)', ['reconcile', '--data-dir', postgresDir], {env: {EDGEWORKERS_STORE__URL: postgresUrl}}),
      cli('status --json', ['status', '--json', '--data-dir', sqliteDir], {exitCode: 13}),
      cli('worker list --json', ['worker', 'list', '--json', '--data-dir', sqliteDir]),
    ]
    const node: Measured = {name: 'node -e 0', args: ['-e', '0']}
    const samples = new Map<string, Sample[]>([node, ...commands].map((command) => [command.name, []]))
    for (let round = 1; round <= ROUNDS; round++) {
      for (const command of commands) {
        samples.get(node.name)!.push(await timeProcess(node))
        samples.get(command.name)!.push(await timeProcess(command))
      }
      log(`round ${round}/${ROUNDS} (${machineLoad()})`)
    }
    await dropDatabase(postgres.adminUrl, 'edgeworkers_bench_start')
    printTable(samples, node.name)
  } finally {
    await postgres.stop()
    rmSync(workDir, {recursive: true, force: true})
  }
}

/** A migrated store with nothing in it; `store` is `sqlite` or a PostgreSQL URL. */
async function migratedDataDir(store: string, dataDir: string): Promise<string> {
  const settings = settingsSchema.parse({data_dir: dataDir, ...(store === 'sqlite' ? {} : {store: {url: store}})})
  const opened = await openStore(settings)
  try {
    await opened.migrate()
  } finally {
    await opened.close()
  }
  return dataDir
}

async function timeProcess(command: Measured): Promise<Sample> {
  const env = {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined, ...command.env}
  const started = performance.now()
  // %x: the child's exit code; %U %S: its user and system CPU seconds.
  const {stderr, code} = await new Promise<{stderr: string; code: number}>((resolve) => {
    execFile(TIME, ['-f', 'bench-start %x %U %S', process.execPath, ...command.args], {env}, (error, _stdout, stderr) =>
      resolve({stderr, code: error ? Number(error.code) : 0}),
    )
  })
  const wallMs = performance.now() - started
  const line = /bench-start (\d+) ([\d.]+) ([\d.]+)\s*$/.exec(stderr)
  if (!line) throw new Error(`${command.name}: no timing from ${TIME}: ${stderr.slice(-300)}`)
  const exitCode = Number(line[1])
  if (exitCode !== (command.exitCode ?? 0) || code !== exitCode) throw new Error(`${command.name} exited ${exitCode}: ${stderr.slice(-300)}`)
  return {wallMs, cpuMs: (Number(line[2]) + Number(line[3])) * 1000}
}

function printTable(samples: Map<string, Sample[]>, nodeName: string): void {
  const nodeWall = median(samples.get(nodeName)!.map((sample) => sample.wallMs))
  const nodeCpu = median(samples.get(nodeName)!.map((sample) => sample.cpuMs))
  console.log(`\n${new Date().toISOString()} — ${ROUNDS} rounds, ${machineLoad()} at the end; bin ${path.relative(process.cwd(), BIN) || BIN}\n`)
  console.log('| process | median wall ms | × node | median CPU ms (user+sys) | × node |')
  console.log('|---|---|---|---|---|')
  for (const [name, values] of samples) {
    const wall = median(values.map((sample) => sample.wallMs))
    const cpu = median(values.map((sample) => sample.cpuMs))
    console.log(`| \`${name}\` | ${wall.toFixed(0)} | ${(wall / nodeWall).toFixed(2)} | ${cpu.toFixed(0)} | ${(cpu / nodeCpu).toFixed(2)} |`)
  }
}

await main()
