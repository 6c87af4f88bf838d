// The oracle for wrangler projects: what wrangler's own build of a project serves. wrangler (pinned
// in devDependencies) builds it with `deploy --dry-run --outdir` — offline: no metrics, and the
// registry it would ask for a newer version is a closed local port — and miniflare runs the
// modules it wrote, with the project's compatibility date and flags.
import {mkdtempSync, readdirSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {Miniflare} from 'miniflare'
import {parse as parseToml} from 'smol-toml'
import {wranglerDryRun} from '../../bench/support/wrangler.js'

const MODULE_TYPES: Record<string, 'ESModule' | 'CommonJS' | 'Text' | 'Data' | 'CompiledWasm'> = {
  '.js': 'ESModule',
  '.mjs': 'ESModule',
  '.cjs': 'CommonJS',
  '.txt': 'Text',
  '.html': 'Text',
  '.sql': 'Text',
  '.bin': 'Data',
  '.wasm': 'CompiledWasm',
}

const SERVICE_WORKER_BUNDLE = '(() => {'

/** What wrangler's build of the project in `dir` (a wrangler.toml project) answers to GET of each path. */
export async function wranglerServes(dir: string, paths: string[]): Promise<Array<{status: number; body: string}>> {
  const work = mkdtempSync(path.join(tmpdir(), 'edgeworkers-wrangler-oracle-'))
  const outdir = path.join(work, 'out')
  try {
    await wranglerDryRun(dir, outdir, path.join(work, 'home'))
    const config = parseToml(readFileSync(path.join(dir, 'wrangler.toml'), 'utf8')) as {compatibility_date: string; compatibility_flags?: string[]}
    const files = readdirSync(outdir, {recursive: true, encoding: 'utf8'}).filter((file) => MODULE_TYPES[path.extname(file)] !== undefined)
    const modules = ['index.js', ...files.filter((file) => file !== 'index.js').sort()].map((file) => ({
      type: MODULE_TYPES[path.extname(file)]!,
      path: path.join(outdir, file),
    }))
    const main = readFileSync(path.join(outdir, 'index.js'), 'utf8')
    const compatibility = {compatibilityDate: config.compatibility_date, compatibilityFlags: config.compatibility_flags ?? []}
    // wrangler bundles an entry without a default export (service-worker syntax) as esbuild's IIFE
    // and uploads it as a service-worker script, not a module.
    const miniflare = main.startsWith(SERVICE_WORKER_BUNDLE)
      ? new Miniflare({script: main, scriptPath: path.join(outdir, 'index.js'), modules: false, ...compatibility})
      : new Miniflare({modules, modulesRoot: outdir, ...compatibility})
    try {
      const answers: Array<{status: number; body: string}> = []
      for (const pathname of paths) {
        const response = await miniflare.dispatchFetch(`http://localhost${pathname}`)
        answers.push({status: response.status, body: await response.text()})
      }
      return answers
    } finally {
      await miniflare.dispose()
    }
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
}
