// What cron pays every minute: `node bin/run.js reconcile` on an empty, migrated SQLite store (no
// row in any lane, no host paired), spawn to exit, against `node -e 0`. The two alternate within
// each round, so both see the same machine; medians of --rounds rounds and the ratio of the medians.
// The aim (issue 30): reconcile ≤ 3× node, wall time. bench/start/run.ts times more commands.
//
//   npm run build && node --import tsx bench/cli/startup.ts [--rounds 15] [--bin path/to/bin/run.js ...]
//
// --bin times another build (another checkout's bin/run.js) on the same store; several --bin are
// timed in turn within each round (a before and an after in the same minutes).
import {execFile} from 'node:child_process'
import {existsSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({options: {rounds: {type: 'string', default: '15'}, bin: {type: 'string', multiple: true}}})
const ROUNDS = Number(options.rounds)
const repoRoot = path.resolve(fileURLToPath(new URL('../..', import.meta.url)))
const BINS = (options.bin ?? [path.join(repoRoot, 'bin/run.js')]).map((bin) => path.resolve(bin))
const AIM = 3

/** Wall ms of one process, spawn to exit; throws unless it exits 0. */
function timed(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const started = performance.now()
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, {env}, (error, _stdout, stderr) => {
      if (error) reject(new Error(`node ${args.join(' ')} failed: ${stderr.slice(-300)}`))
      else resolve(performance.now() - started)
    })
  })
}

async function main(): Promise<void> {
  for (const bin of BINS) if (!existsSync(bin)) throw new Error(`no built CLI at ${bin}: run \`npm run build\` first`)
  const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-startup-'))
  try {
    const store = await openStore(settingsSchema.parse({data_dir: dataDir}))
    await store.migrate()
    await store.close()
    const env = {...process.env, EDGEWORKERS_DATA_DIR: dataDir, EDGEWORKERS_CONFIG: undefined, EDGEWORKERS_STORE__URL: undefined}
    const loadBefore = machineLoad()
    const node: number[] = []
    const reconcile = BINS.map((): number[] => [])
    // One unmeasured start each: the first reads the files from disk (and writes a build's code cache).
    await timed(['-e', '0'], env)
    for (const bin of BINS) await timed([bin, 'reconcile'], env)
    for (let round = 1; round <= ROUNDS; round++) {
      node.push(await timed(['-e', '0'], env))
      for (const [index, bin] of BINS.entries()) reconcile[index]!.push(await timed([bin, 'reconcile'], env))
      log(`round ${round}/${ROUNDS}: node ${node.at(-1)!.toFixed(0)} ms, reconcile ${reconcile.map((times) => times.at(-1)!.toFixed(0)).join(' / ')} ms`)
    }
    console.log(`${new Date().toISOString()} — ${ROUNDS} rounds; before: ${loadBefore}; after: ${machineLoad()}`)
    console.log(`node -e 0: median ${median(node).toFixed(0)} ms`)
    for (const [index, bin] of BINS.entries()) {
      const ratio = median(reconcile[index]!) / median(node)
      console.log(
        `reconcile (empty SQLite store), ${path.relative(process.cwd(), bin) || bin}: median ${median(reconcile[index]!).toFixed(0)} ms, ratio ${ratio.toFixed(2)} (aim ≤ ${AIM}: ${ratio <= AIM ? 'met' : 'missed'})`,
      )
    }
  } finally {
    rmSync(dataDir, {recursive: true, force: true})
  }
}

await main()
