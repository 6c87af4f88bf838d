// Where a command's start-up goes, module by module: imports the built command's static closure of
// chunks leaf-first in a fresh process, timing each chunk's load and evaluation (CPU, user+sys), and
// names each chunk by the packages (or source folders) with the most bytes in it. Medians of --rounds
// fresh processes. The first chunk also pays the ES module loader's warm-up, and a bundled CommonJS
// package (oclif, pino) runs when first required: its evaluation counts against the first chunk that
// requires it, which may be a small one (src/cli/flags.ts for oclif). Only imports are timed, not
// what the command then does. A hot command (src/main.ts's HOT_COMMANDS) starts from its CommonJS
// bundle, dist/hot-commands.cjs, instead: what is itemised for it is its ES module build, which the
// same modules make up.
//
//   node --import tsx bench/start/modules.ts [--command reconcile] [--rounds 9]
//
// Reads the esbuild metafile the build leaves in node_modules/.cache (npm run build first).
import {execFileSync} from 'node:child_process'
import {existsSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath, pathToFileURL} from 'node:url'
import {parseArgs} from 'node:util'
import {machineLoad, median} from '../support/stats.js'

const {values: options} = parseArgs({options: {command: {type: 'string', default: 'reconcile'}, rounds: {type: 'string', default: '9'}}})
const repoRoot = path.resolve(fileURLToPath(new URL('../..', import.meta.url)))

interface Metafile {
  outputs: Record<string, {bytes: number; imports: Array<{path: string; kind: string; external?: boolean}>; inputs: Record<string, {bytesInOutput: number}>}>
}

/** The chunks `entry` imports statically, dependencies before their importers. */
function closure(meta: Metafile, entry: string): string[] {
  const order: string[] = []
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const imported of meta.outputs[file]!.imports) if (imported.kind === 'import-statement' && !imported.external) visit(imported.path)
    order.push(file)
  }
  visit(entry)
  return order
}

function label(meta: Metafile, file: string): string {
  const bytes = new Map<string, number>()
  for (const [input, {bytesInOutput}] of Object.entries(meta.outputs[file]!.inputs)) {
    const name = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? input.split('/').slice(0, 2).join('/')
    bytes.set(name, (bytes.get(name) ?? 0) + bytesInOutput)
  }
  return (
    [...bytes]
      .sort((a, b) => b[1] - a[1])
      .filter(([, size]) => size > 1024)
      .slice(0, 3)
      .map(([name]) => name)
      .join(', ') || 'shared glue (< 1 KiB)'
  )
}

/** Run by a bare node (no tsx loader hooks in the way): imports each chunk in order, printing its CPU milliseconds as JSON. */
const CHILD = `
const cpu = []
for (const url of JSON.parse(process.argv[1])) {
  const before = process.cpuUsage()
  await import(url)
  const used = process.cpuUsage(before)
  cpu.push((used.user + used.system) / 1000)
}
process.stdout.write(JSON.stringify(cpu))`

async function main(): Promise<void> {
  const metafile = path.join(repoRoot, 'node_modules/.cache/edgeworkers/bundle-meta.json')
  if (!existsSync(metafile)) throw new Error(`no ${metafile}: run \`npm run build\` first`)
  const meta = JSON.parse(readFileSync(metafile, 'utf8')) as Metafile
  const files = closure(meta, `dist/commands/${options.command!.replaceAll(' ', '/')}.js`)
  const rounds: number[][] = []
  for (let round = 0; round < Number(options.rounds); round++) {
    const urls = files.map((file) => pathToFileURL(path.join(repoRoot, file)).href)
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', CHILD, JSON.stringify(urls)], {cwd: repoRoot, encoding: 'utf8'})
    rounds.push(JSON.parse(output) as number[])
  }
  const rows = files.map((file, index) => ({
    name: `${label(meta, file)}${index === 0 ? " (the first import: with the ES module loader's warm-up)" : ''}`,
    cpu: median(rounds.map((round) => round[index]!)),
    kib: meta.outputs[file]!.bytes / 1024,
  }))
  console.log(`\n\`${options.command}\`: ${files.length} files, ${rounds.length} fresh processes, ${machineLoad()}\n`)
  console.log('| chunk (largest parts) | KiB | median CPU ms |')
  console.log('|---|---|---|')
  for (const row of rows.sort((a, b) => b.cpu - a.cpu).filter((row) => row.cpu >= 2))
    console.log(`| ${row.name} | ${row.kib.toFixed(0)} | ${row.cpu.toFixed(0)} |`)
  console.log(
    `| **all ${files.length} files** | ${rows.reduce((sum, row) => sum + row.kib, 0).toFixed(0)} | ${rows.reduce((sum, row) => sum + row.cpu, 0).toFixed(0)} |`,
  )
}

await main()
