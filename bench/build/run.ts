// Build time of a wrangler project (a TypeScript Hono app with its npm dependency) through the kit,
// against esbuild run directly on the same entry with the same options, alternating in one run:
//   esbuild    esbuild.build() — bundle only, in memory
//   stage      the kit's wrangler staging: config, esbuild, SBOM from package-lock.json, staged files
//   build      the whole version build: staging, archive, bundle, digests, receipt and the start
//              check in a throwaway workerd (what `deploy` and `deploy --dry-run` run)
//   wrangler   `wrangler deploy --dry-run --outdir` (wrangler from npm, offline), wrangler's own build
//              of the same project; its process start is part of it, as it is for a user
//
//   node --import tsx bench/build/run.ts [--rounds 15]
import {execFileSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {build} from 'esbuild'
import {buildProject, type ArtifactLimits} from '../../src/engine/project/build.js'
import {findWranglerConfig} from '../../src/engine/project/wrangler/config.js'
import {stageWranglerProject, WORKER_BUNDLE_OPTIONS} from '../../src/engine/project/wrangler/stage.js'
import {wranglerDryRun} from '../support/wrangler.js'
import {log, machineLoad, median} from '../support/stats.js'

const {values} = parseArgs({options: {rounds: {type: 'string', default: '15'}}})
const rounds = Number(values.rounds)
const LIMITS: ArtifactLimits = {
  project_archive_max_bytes: 2 * 1024 * 1024,
  bundle_max_bytes: 5 * 1024 * 1024,
  project_files_max_bytes: 16 * 1024 * 1024,
  assets_max_files: 20_000,
  asset_max_bytes: 25 * 1024 * 1024,
}

const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-build-'))
mkdirSync(path.join(dir, 'src'))
writeFileSync(path.join(dir, 'package.json'), JSON.stringify({name: 'bench-hono', private: true, dependencies: {hono: '4.10.4'}}))
writeFileSync(path.join(dir, 'wrangler.toml'), 'name = "bench-hono"\nmain = "src/index.ts"\ncompatibility_date = "2026-11-01"\n')
writeFileSync(
  path.join(dir, 'src/index.ts'),
  `import {Hono} from 'hono'\nconst app = new Hono()\napp.use('*', async (c, next) => { await next(); c.header('x-bench', '1') })\napp.get('/', (c) => c.text('hi'))\napp.get('/items/:id', (c) => c.json({id: c.req.param('id')}))\nexport default app\n`,
)
log('npm install hono@4.10.4 …')
execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], {cwd: dir, stdio: 'ignore'})

const direct = () =>
  build({
    absWorkingDir: dir,
    entryPoints: [path.join(dir, 'src/index.ts')],
    outfile: path.join(dir, 'src/index.js'),
    ...WORKER_BUNDLE_OPTIONS,
    external: ['cloudflare:*'],
    sourcemap: 'external',
    metafile: true,
    logLevel: 'silent',
  })
const stage = async () => (await stageWranglerProject(dir, findWranglerConfig(dir)!, {bundleMaxBytes: LIMITS.bundle_max_bytes})).cleanup()
const whole = () => buildProject(dir, LIMITS)
// wrangler's output and config home sit outside the project, so the kit's build never sees them.
const wranglerWork = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-wrangler-'))
const wrangler = () => wranglerDryRun(dir, path.join(wranglerWork, 'out'), path.join(wranglerWork, 'home'))

const time = async (run: () => Promise<unknown>) => {
  const start = performance.now()
  await run()
  return performance.now() - start
}
const samples: Record<'esbuild' | 'stage' | 'build' | 'wrangler', number[]> = {esbuild: [], stage: [], build: [], wrangler: []}
for (const run of [direct, stage, whole, wrangler]) await run() // warm-up: module loading, esbuild's service, disk cache
for (let round = 0; round < rounds; round++) {
  samples.esbuild.push(await time(direct))
  samples.stage.push(await time(stage))
  samples.build.push(await time(whole))
  samples.wrangler.push(await time(wrangler))
}
rmSync(dir, {recursive: true, force: true})
rmSync(wranglerWork, {recursive: true, force: true})

const base = median(samples.esbuild)
console.log(`build of a TypeScript Hono app, ${rounds} alternating rounds, medians (${machineLoad()})`)
const wranglerMedian = median(samples.wrangler)
console.log('| | median ms | ratio to esbuild | ratio to wrangler --dry-run |')
console.log('|---|---|---|---|')
for (const [name, list] of Object.entries(samples)) {
  console.log(`| ${name} | ${median(list).toFixed(1)} | ${(median(list) / base).toFixed(2)} | ${(median(list) / wranglerMedian).toFixed(2)} |`)
}
