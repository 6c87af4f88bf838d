// Serving a release's static assets on the data plane. A GET or HEAD whose path matches an asset
// (after `_redirects` and html_handling) is answered here without running the Worker, unless
// run_worker_first claims the path; anything else goes on to the Worker. The Worker's assets
// binding (`env.ASSETS.fetch(request)`) comes through the service-binding listener and is answered
// the same way, minus run_worker_first, with an empty 404 when nothing matches.
import type http from 'node:http'
import type {AssetFile, ReleaseAssets} from '../../protocol/management-api.js'
import {headersFor, matchRedirect, parseHeaders, parseRedirects, type HeaderRule, type RedirectRule} from '../../protocol/assets/rules.js'
import type {HostMetrics} from '../metrics.js'
import type {HostState} from '../state/host-state.js'
import type {AssetFiles} from './files.js'
import {applyHeaderChanges, writeAsset} from './respond.js'
import {type Resolution, resolveAsset, runsWorkerFirst} from './routing.js'

interface CompiledAssets {
  release: ReleaseAssets
  byPath: Map<string, AssetFile>
  headers: HeaderRule[]
  redirects: RedirectRule[]
}

const MAX_COMPILED_RELEASES = 1_000

export class AssetServer {
  private readonly compiled = new Map<string, CompiledAssets | null>()

  constructor(
    private readonly state: HostState,
    private readonly files: AssetFiles,
    private readonly metrics: HostMetrics,
    /** A request answered from the assets alone, the Worker not run (its tails hear of it). */
    private readonly onServed: (script: string, request: {method: string; path: string; status: number; startedAt: number}) => void,
  ) {}

  /**
   * Answers a data-plane request for `script`, whose shard serves `releaseGeneration`, from its
   * assets: true when it did, false when the Worker must.
   */
  async serve(
    script: string,
    releaseGeneration: string | undefined,
    target: string,
    request: http.IncomingMessage,
    response: http.ServerResponse,
    requestId: string,
  ) {
    const assets = releaseGeneration === undefined ? null : this.assetsOf(script, releaseGeneration)
    if (assets === null || (request.method !== 'GET' && request.method !== 'HEAD')) return false
    const url = parseTarget(target)
    if (url === null || runsWorkerFirst(assets.release.config, url.pathname)) return false
    const startedAt = Date.now()
    if (!(await this.answer(script, assets, url, request, response, requestId, 'direct'))) return false
    this.onServed(script, {method: request.method, path: `${url.pathname}${url.search}`, status: response.statusCode, startedAt})
    return true
  }

  /** Answers a call of the Worker's assets binding; always answers. */
  async serveBinding(
    script: string,
    releaseGeneration: string | null,
    target: string,
    request: http.IncomingMessage,
    response: http.ServerResponse,
    requestId: string,
  ) {
    const assets = releaseGeneration === null ? null : this.assetsOf(script, releaseGeneration)
    const url = parseTarget(target)
    if (assets === null || url === null) return void response.writeHead(404, {'x-request-id': requestId}).end()
    if (request.method !== 'GET' && request.method !== 'HEAD') return void response.writeHead(405, {allow: 'GET, HEAD', 'x-request-id': requestId}).end()
    if (!(await this.answer(script, assets, url, request, response, requestId, 'binding'))) {
      response.writeHead(404, {'x-request-id': requestId}).end()
      this.metrics.assetResponses.inc({script, status: '404', via: 'binding'})
    }
  }

  private async answer(
    script: string,
    assets: CompiledAssets,
    url: URL,
    request: http.IncomingMessage,
    response: http.ServerResponse,
    requestId: string,
    via: 'direct' | 'binding',
  ): Promise<boolean> {
    const pathname = decodePath(url.pathname)
    if (pathname === null) return false
    const exists = (path: string) => assets.byPath.has(path)
    const redirect = matchRedirect(assets.redirects, pathname)
    let resolution: Resolution | null
    if (redirect && redirect.status !== 200) resolution = {kind: 'redirect', location: redirect.destination, status: redirect.status}
    else if (redirect) {
      // A 200 rewrite resolves its destination as if requested (html_handling may redirect it);
      // a destination no asset answers is a 404, never the Worker — as wrangler's asset worker does.
      const destination = decodePath(new URL(redirect.destination, url).pathname)
      resolution = (destination === null ? null : resolveAsset(destination, assets.release.config, exists)) ?? {kind: 'empty', status: 404}
    } else resolution = resolveAsset(pathname, assets.release.config, exists)
    if (resolution === null) return false
    response.setHeader('x-request-id', requestId)
    const host = String(request.headers.host ?? '')
      .toLowerCase()
      .replace(/:\d+$/, '')
    const changes = headersFor(assets.headers, host, pathname)
    if (resolution.kind !== 'asset') {
      applyHeaderChanges(response, changes)
      const {status} = resolution
      if (resolution.kind === 'redirect') {
        const location = resolution.location.includes('?') || url.search === '' ? resolution.location : `${resolution.location}${url.search}`
        response.setHeader('location', location)
      }
      response.writeHead(status).end()
      this.metrics.assetResponses.inc({script, status: String(status), via})
      return true
    }
    const file = assets.byPath.get(resolution.path)!
    const bytes = await this.files.read(file.sha256)
    // A release is stored only once its files are; a file gone since is the host's damage.
    if (bytes === null) throw new Error(`asset file ${file.sha256} of ${script} is missing from the host`)
    await writeAsset(request, response, {path: resolution.path, sha256: file.sha256, bytes, status: resolution.status}, changes)
    this.metrics.assetResponses.inc({script, status: String(response.statusCode), via})
    return true
  }

  private assetsOf(script: string, releaseGeneration: string): CompiledAssets | null {
    const key = `${script}\n${releaseGeneration}`
    let compiled = this.compiled.get(key)
    if (compiled === undefined) {
      const release = this.state.releaseAssets.of(script, releaseGeneration)
      // Rules were checked by the kit; a file that no longer parses serves without them.
      compiled = release && {
        release,
        byPath: new Map(release.files.map((file) => [file.path, file])),
        headers: release.headers === null ? [] : tryParse(() => parseHeaders(release.headers!)),
        redirects: release.redirects === null ? [] : tryParse(() => parseRedirects(release.redirects!)),
      }
      if (this.compiled.size >= MAX_COMPILED_RELEASES) this.compiled.clear()
      this.compiled.set(key, compiled)
    }
    return compiled
  }
}

function tryParse<T>(parse: () => T[]): T[] {
  try {
    return parse()
  } catch {
    return []
  }
}

function parseTarget(target: string): URL | null {
  try {
    return new URL(target, 'http://asset.invalid')
  } catch {
    return null
  }
}

function decodePath(pathname: string): string | null {
  try {
    return decodeURIComponent(pathname)
  } catch {
    return null
  }
}
