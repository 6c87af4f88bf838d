// The oracle for wrangler projects: what wrangler's own build of a project serves. wrangler (pinned
// in devDependencies) builds it with `deploy --dry-run --outdir` — offline: no metrics, and the
// registry it would ask for a newer version is a closed local port — and miniflare runs the
// modules it wrote, with the project's compatibility date and flags.
import {execFile} from 'node:child_process'
import {mkdtempSync, readdirSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'
import {Miniflare} from 'miniflare'
import {parse as parseToml} from 'smol-toml'

const WRANGLER_BIN = fileURLToPath(new URL('../../node_modules/wrangler/bin/wrangler.js', import.meta.url))

/** The environment wrangler runs offline in: nothing is sent anywhere. */
export function offlineWranglerEnv(home: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    CI: '1',
    // wrangler defines process.env.NODE_ENV from its own environment; the kit always as "production".
    NODE_ENV: undefined,
    WRANGLER_SEND_METRICS: 'false',
    npm_config_registry: 'http://127.0.0.1:9/',
    XDG_CONFIG_HOME: home,
    CLOUDFLARE_API_TOKEN: undefined,
    CLOUDFLARE_ACCOUNT_ID: undefined,
  }
}

/** Runs `wrangler deploy --dry-run --outdir <outdir>` in `dir`; throws with wrangler's output if it fails. */
export async function wranglerDryRun(dir: string, outdir: string, home: string): Promise<void> {
  try {
    await promisify(execFile)(process.execPath, [WRANGLER_BIN, 'deploy', '--dry-run', '--outdir', outdir], {cwd: dir, env: offlineWranglerEnv(home)})
  } catch (error) {
    const {stdout, stderr} = error as {stdout: string; stderr: string}
    throw new Error(`wrangler deploy --dry-run failed in ${dir}:\n${stdout}\n${stderr}`)
  }
}

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
  const config = parseToml(readFileSync(path.join(dir, 'wrangler.toml'), 'utf8')) as {compatibility_date: string; compatibility_flags?: string[]}
  const built = await wranglerBuild(dir, {compatibilityDate: config.compatibility_date, compatibilityFlags: config.compatibility_flags ?? []})
  try {
    const answers: Array<{status: number; body: string}> = []
    for (const pathname of paths) {
      const response = await built.miniflare.dispatchFetch(`http://localhost${pathname}`)
      answers.push({status: response.status, body: await response.text()})
    }
    return answers
  } finally {
    await built.dispose()
  }
}

/**
 * wrangler's own build of the project in `dir`, run by miniflare with `options`: the compatibility
 * date and flags, and the bindings as the project's config names them (`kvNamespaces`, `d1Databases`,
 * `queueProducers`, …). Dispose it when done.
 */
export async function wranglerBuild(
  dir: string,
  options: {compatibilityDate: string; compatibilityFlags?: string[]} & Record<string, unknown>,
): Promise<{miniflare: Miniflare; dispose(): Promise<void>}> {
  const work = mkdtempSync(path.join(tmpdir(), 'edgeworkers-wrangler-oracle-'))
  const outdir = path.join(work, 'out')
  try {
    await wranglerDryRun(dir, outdir, path.join(work, 'home'))
    const files = readdirSync(outdir, {recursive: true, encoding: 'utf8'}).filter((file) => MODULE_TYPES[path.extname(file)] !== undefined)
    const modules = ['index.js', ...files.filter((file) => file !== 'index.js').sort()].map((file) => ({
      type: MODULE_TYPES[path.extname(file)]!,
      path: path.join(outdir, file),
    }))
    const main = readFileSync(path.join(outdir, 'index.js'), 'utf8')
    // wrangler bundles an entry without a default export (service-worker syntax) as esbuild's IIFE
    // and uploads it as a service-worker script, not a module.
    const miniflare = main.startsWith(SERVICE_WORKER_BUNDLE)
      ? new Miniflare({script: main, scriptPath: path.join(outdir, 'index.js'), modules: false, ...options})
      : new Miniflare({modules, modulesRoot: outdir, ...options})
    await miniflare.ready
    return {
      miniflare,
      async dispose() {
        await miniflare.dispose()
        rmSync(work, {recursive: true, force: true})
      },
    }
  } catch (error) {
    rmSync(work, {recursive: true, force: true})
    throw error
  }
}
