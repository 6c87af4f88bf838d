// The oracle for wrangler projects: what wrangler's own build of a project serves. wrangler (pinned
// in devDependencies) builds it with `deploy --dry-run --outdir`, offline (../../scripts/wrangler-offline.ts),
// and miniflare runs the modules it wrote, with the project's compatibility date, flags, vars, KV namespaces and Durable Objects.
import {mkdtempSync, readdirSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {Miniflare} from 'miniflare'
import {wranglerDryRun} from '../../scripts/wrangler-offline.js'
import {findWranglerConfig, loadWranglerConfig} from '../../src/engine/project/wrangler/config.js'

type ModuleType = 'ESModule' | 'CommonJS' | 'Text' | 'Data' | 'CompiledWasm'
const MODULE_TYPES: Record<string, ModuleType> = {
  '.js': 'ESModule',
  '.mjs': 'ESModule',
  '.cjs': 'CommonJS',
  '.txt': 'Text',
  '.html': 'Text',
  '.sql': 'Text',
  '.bin': 'Data',
  '.wasm': 'CompiledWasm',
}

/** The module types by extension: wrangler's defaults, then the project's rules (by their globs' extensions). */
function moduleTypes(rules: Array<{type: string; globs: string[]}>): Record<string, ModuleType> {
  const types = {...MODULE_TYPES}
  for (const rule of rules) {
    for (const glob of rule.globs) {
      const extension = /\*(\.[\w.]+)$/.exec(glob)?.[1]
      if (extension !== undefined) types[extension] = rule.type as ModuleType
    }
  }
  return types
}

const SERVICE_WORKER_BUNDLE = '(() => {'

/** One request to a Worker; a bare string is a GET of that path. */
export type WorkerRequest = string | {path: string; method?: string; body?: string; headers?: Record<string, string>}
/** What a Worker answered: status, body, and the response headers a test compares (by lower-case name). */
export interface WorkerAnswer {
  status: number
  body: string
  headers?: Record<string, string | null>
}

/** The parts of a request undici and fetch both take. */
export function requestInit(request: WorkerRequest): {path: string; method: string; body?: string; headers: Record<string, string>} {
  return typeof request === 'string' ? {path: request, method: 'GET', headers: {}} : {method: 'GET', headers: {}, ...request}
}

/** What wrangler's build of the project in `dir` answers to GET of each path. */
export async function wranglerServes(dir: string, paths: string[]): Promise<Array<{status: number; body: string}>> {
  return wranglerAnswers(dir, paths, [])
}

/**
 * What wrangler's build of the project in `dir` (its wrangler.toml/.jsonc/.json) answers to each
 * request, with the named response headers; its vars, KV namespaces and Durable Objects are given as
 * wrangler dev gives them (local, empty at start).
 */
export async function wranglerAnswers(dir: string, requests: WorkerRequest[], headerNames: string[]): Promise<WorkerAnswer[]> {
  const built = await wranglerBuild(dir)
  try {
    const answers: WorkerAnswer[] = []
    for (const request of requests) {
      const {path: pathname, ...init} = requestInit(request)
      const response = await built.miniflare.dispatchFetch(`http://localhost${pathname}`, {...init, redirect: 'manual'})
      const answer: WorkerAnswer = {status: response.status, body: await response.text()}
      if (headerNames.length > 0) answer.headers = Object.fromEntries(headerNames.map((name) => [name, response.headers.get(name)]))
      answers.push(answer)
    }
    return answers
  } finally {
    await built.dispose()
  }
}

/**
 * wrangler's own build of the project in `dir`, run by miniflare with the config's compatibility
 * date, flags, vars, KV namespaces and Durable Objects, and `options` over them (miniflare's names:
 * `d1Databases`, `queueProducers`, …). Dispose it when done.
 */
export async function wranglerBuild(dir: string, options: Record<string, unknown> = {}): Promise<{miniflare: Miniflare; dispose(): Promise<void>}> {
  const work = mkdtempSync(path.join(tmpdir(), 'edgeworkers-wrangler-oracle-'))
  const outdir = path.join(work, 'out')
  try {
    await wranglerDryRun(dir, outdir, path.join(work, 'home'))
    const {config} = loadWranglerConfig(findWranglerConfig(dir)!, null)
    const types = moduleTypes(config.rules ?? [])
    // wrangler names the bundle after the entry: src/worker.mjs → worker.js.
    const mainFile = `${path.basename(config.main ?? 'index.js').replace(/\.[cm]?[jt]sx?$/, '')}.js`
    const files = readdirSync(outdir, {recursive: true, encoding: 'utf8'}).filter((file) => types[path.extname(file)] !== undefined)
    const modules = [mainFile, ...files.filter((file) => file !== mainFile).sort()].map((file) => ({
      type: types[path.extname(file)]!,
      path: path.join(outdir, file),
    }))
    const main = readFileSync(path.join(outdir, mainFile), 'utf8')
    const worker = {
      compatibilityDate: config.compatibility_date,
      compatibilityFlags: config.compatibility_flags ?? [],
      bindings: config.vars ?? {},
      kvNamespaces: (config.kv_namespaces ?? []).map((namespace) => namespace.binding),
      durableObjects: Object.fromEntries((config.durable_objects?.bindings ?? []).map((binding) => [binding.name, binding.class_name])),
      ...options,
    }
    // wrangler bundles an entry without a default export (service-worker syntax) as esbuild's IIFE
    // and uploads it as a service-worker script, not a module.
    const miniflare = main.startsWith(SERVICE_WORKER_BUNDLE)
      ? new Miniflare({script: main, scriptPath: path.join(outdir, mainFile), modules: false, ...worker})
      : new Miniflare({modules, modulesRoot: outdir, ...worker})
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
