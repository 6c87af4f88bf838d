// Where the kit runner of bench/scale spends its time per row: one embedded PostgreSQL logging every
// statement (`log_statement=all`), ROWS due deploy rows drained by one kit-runner process at each
// CONCURRENCY with a V8 CPU profile of the drain (EDGEWORKERS_BENCH_CPU_PROFILE). Prints, per
// concurrency: the runner's CPU per row (busy samples, not idle), statements and transactions per
// row by kind, the top functions by self and by total time, and the time by package.
//
//   node --import tsx bench/scale/profile.ts [--rows 2000] [--concurrency 1,16] [--top 15]
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {createInterface} from 'node:readline'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'
import {createDatabase, postgresServer} from '../support/store-baseline.js'
import {machineLoad} from '../support/stats.js'
import {fillOutbox, seedWorkers} from './backlog.js'

const {values: options} = parseArgs({
  options: {rows: {type: 'string', default: '2000'}, concurrency: {type: 'string', default: '1,16'}, top: {type: 'string', default: '15'}},
})
const ROWS = Number(options.rows)
const TOP = Number(options.top)
const SCOPE = 'onprem:0123456789ab'
const here = path.dirname(fileURLToPath(import.meta.url))
const workDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-profile-'))

if (process.env.EDGEWORKERS_BENCH_PG_URL) throw new Error('bench/scale/profile.ts counts statements in the server log: it needs its embedded server')
/** Statement kind → how many the server logged while counting is on. */
let statements: Map<string, number> | null = null
const postgres = await postgresServer({
  flags: ['log_statement=all'],
  onLog: (chunk) => {
    if (!statements) return
    for (const line of chunk.split('\n')) {
      // A statement the kit writes as a template starts on the line after `execute <unnamed>:`.
      const logged = /LOG:\s+(?:statement|execute [^:]*):\s*(.*)$/i.exec(line)
      const text = logged ? logged[1]!.trim() : awaitingText ? line.trim() : ''
      awaitingText = logged !== null && text === ''
      if (text) count(statements, text)
    }
  },
})
let awaitingText = false

/** Counts a statement by its kind: the verb, and the table it writes. */
function count(counted: Map<string, number>, text: string): void {
  const [verb = '', second = '', third = ''] = text.toLowerCase().split(/\s+/)
  const kind = verb === 'update' ? `update ${second}` : verb === 'insert' || verb === 'delete' ? `${verb} ${third}` : verb
  counted.set(kind, (counted.get(kind) ?? 0) + 1)
}
try {
  const url = await createDatabase(postgres.adminUrl, 'edgeworkers_bench_profile')
  const store = await openStore(settingsSchema.parse({data_dir: workDir, store: {url}}))
  await store.migrate()
  await seedWorkers(store, 'bench')
  await store.close()
  console.log(`\n${new Date().toISOString()}, ${machineLoad()}; ${ROWS} rows per run, one kit-runner process\n`)
  for (const concurrency of options.concurrency.split(',').map(Number)) {
    await fillOutbox({url, workDir, scope: SCOPE, company: 'bench', label: `profile-${concurrency}`, rows: ROWS})
    const profileFile = path.join(workDir, `kit-${concurrency}.cpuprofile`)
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'kit-runner.ts'), url, workDir, SCOPE, String(concurrency)], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: {...process.env, EDGEWORKERS_BENCH_CPU_PROFILE: profileFile},
    })
    const exited = once(child, 'exit')
    const lines = createInterface({input: child.stdout})[Symbol.asyncIterator]()
    await lines.next()
    statements = new Map()
    const started = performance.now()
    child.stdin.write('go\n')
    const report = JSON.parse((await lines.next()).value as string) as {completed: number; cpuMicros: number}
    const seconds = (performance.now() - started) / 1000
    // The server may log the last statements a moment after they ran.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const counted = statements
    statements = null
    await exited
    console.log(`### concurrency ${concurrency}: ${report.completed} rows in ${seconds.toFixed(2)} s (${(report.completed / seconds).toFixed(0)} rows/s)\n`)
    console.log(`Runner process CPU per row (user + system, process.cpuUsage): **${(report.cpuMicros / report.completed).toFixed(0)} µs**\n`)
    printStatements(counted, report.completed)
    printProfile(JSON.parse(readFileSync(profileFile, 'utf8')) as CpuProfile, report.completed)
  }
} finally {
  await postgres.stop()
  rmSync(workDir, {recursive: true, force: true})
}

function printStatements(counted: Map<string, number>, rows: number): void {
  const total = [...counted.values()].reduce((sum, n) => sum + n, 0)
  console.log(`Statements per row: **${(total / rows).toFixed(2)}** (${total} in all)\n`)
  console.log('| statement | per row |\n|---|---|')
  for (const [kind, n] of [...counted].sort((a, b) => b[1] - a[1])) console.log(`| \`${kind}\` | ${(n / rows).toFixed(2)} |`)
  console.log()
}

interface CpuProfileNode {
  id: number
  callFrame: {functionName: string; url: string; lineNumber: number}
  hitCount?: number
  children?: number[]
}
interface CpuProfile {
  nodes: CpuProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
}

function printProfile(profile: CpuProfile, rows: number): void {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const microsPerSample = (profile.endTime - profile.startTime) / profile.samples.length
  const self = new Map<string, number>()
  const total = new Map<string, number>()
  const packages = new Map<string, number>()
  let busy = 0
  for (const sample of profile.samples) {
    const leaf = byId.get(sample)!
    if (leaf.callFrame.functionName === '(idle)') continue
    busy++
    const leafName = frameName(leaf)
    self.set(leafName, (self.get(leafName) ?? 0) + 1)
    packages.set(packageOf(leaf), (packages.get(packageOf(leaf)) ?? 0) + 1)
    const seen = new Set<string>()
    for (let id: number | undefined = sample; id !== undefined; id = parent.get(id)) {
      const name = frameName(byId.get(id)!)
      if (!seen.has(name)) total.set(name, (total.get(name) ?? 0) + 1)
      seen.add(name)
    }
  }
  const perRow = (samples: number) => ((samples * microsPerSample) / rows).toFixed(0)
  console.log(`Profiler samples per row not idle (CPU, and waits for it, on the main thread): ${perRow(busy)} µs\n`)
  const table = (title: string, counts: Map<string, number>) => {
    console.log(`| ${title} | µs per row | share of busy |\n|---|---|---|`)
    const rowsOf = [...counts].filter(([name]) => name !== '(root)').sort((a, b) => b[1] - a[1])
    for (const [name, n] of rowsOf.slice(0, TOP)) console.log(`| \`${name}\` | ${perRow(n)} | ${((100 * n) / busy).toFixed(1)} % |`)
    console.log()
  }
  table('package (self time)', packages)
  table('function (self time)', self)
  table('function (total time)', total)
}

function frameName(node: CpuProfileNode): string {
  const {functionName, url, lineNumber} = node.callFrame
  if (!url) return functionName || '(anonymous)'
  return `${functionName || '(anonymous)'} ${shortUrl(url)}:${lineNumber + 1}`
}

function shortUrl(url: string): string {
  const modules = url.lastIndexOf('node_modules/')
  if (modules >= 0) return url.slice(modules + 'node_modules/'.length)
  const source = url.indexOf('/src/')
  if (source >= 0) return url.slice(source + 1)
  const bench = url.indexOf('/bench/')
  return bench >= 0 ? url.slice(bench + 1) : url
}

function packageOf(node: CpuProfileNode): string {
  const {url, functionName} = node.callFrame
  if (!url) return functionName.startsWith('(') ? functionName : '(native)'
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (modules) return modules[1]!
  if (url.startsWith('node:')) return 'node: (built-ins)'
  if (url.includes('/src/'))
    return `ours: ${url
      .slice(url.indexOf('/src/') + 1)
      .split('/')
      .slice(0, 3)
      .join('/')}`
  return shortUrl(url)
}
