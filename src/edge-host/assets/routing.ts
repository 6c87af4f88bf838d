// Which asset answers a pathname, as Cloudflare's asset worker decides it (Workers static assets:
// "HTML handling" and "Not found handling"): html_handling maps pretty URLs to .html and index.html
// files and redirects (307) the other spellings to the canonical one; not_found_handling serves the
// nearest 404.html (status 404) or, for a single-page application, /index.html (200). null: no
// asset answers (the Worker does, if there is one).
import type {AssetConfig, HtmlHandling} from '../../protocol/management-api.js'

export type Resolution =
  | {kind: 'asset'; path: string; status: 200 | 404}
  | {kind: 'redirect'; location: string; status: number}
  /** An answer with no body: a rewrite to a path no asset answers. */
  | {kind: 'empty'; status: 404}

type Exists = (path: string) => boolean

export function resolveAsset(pathname: string, config: AssetConfig, exists: Exists): Resolution | null {
  return htmlHandling(pathname, config.htmlHandling, exists) ?? notFound(pathname, config, exists)
}

function notFound(pathname: string, config: AssetConfig, exists: Exists): Resolution | null {
  if (config.notFoundHandling === 'single-page-application') return exists('/index.html') ? {kind: 'asset', path: '/index.html', status: 200} : null
  if (config.notFoundHandling === '404-page') {
    for (let dir = pathname; dir.includes('/'); ) {
      dir = dir.slice(0, dir.lastIndexOf('/'))
      if (exists(`${dir}/404.html`)) return {kind: 'asset', path: `${dir}/404.html`, status: 404}
    }
  }
  return null
}

function htmlHandling(pathname: string, mode: HtmlHandling, exists: Exists): Resolution | null {
  const serve = (path: string): Resolution | null => (exists(path) ? {kind: 'asset', path, status: 200} : null)
  // Redirect to `destination` when `file` exists and the destination is not an asset of its own.
  const redirect = (file: string, destination: string): Resolution | null =>
    destination !== pathname && !exists(destination) && exists(file) ? {kind: 'redirect', location: destination, status: 307} : null
  const p = pathname
  const strip = (suffix: string) => p.slice(0, -suffix.length)
  switch (mode) {
    case 'none':
      return serve(p)
    case 'auto-trailing-slash':
      if (p.endsWith('/index')) return serve(p) ?? redirect(`${p}.html`, strip('index')) ?? redirect(`${strip('/index')}.html`, strip('/index')) ?? fallback()
      if (p.endsWith('/index.html')) return redirect(p, strip('index.html')) ?? redirect(`${strip('/index.html')}.html`, strip('/index.html')) ?? fallback()
      if (p.endsWith('/')) return serve(`${p}index.html`) ?? redirect(`${strip('/')}.html`, strip('/')) ?? fallback()
      if (p.endsWith('.html')) return redirect(p, strip('.html')) ?? redirect(`${strip('.html')}/index.html`, `${strip('.html')}/`) ?? fallback()
      return fallback()
    case 'force-trailing-slash':
      if (p.endsWith('/index')) return serve(p) ?? redirect(`${p}.html`, strip('index')) ?? redirect(`${strip('/index')}.html`, strip('index')) ?? forced()
      if (p.endsWith('/index.html')) return redirect(p, strip('index.html')) ?? redirect(`${strip('/index.html')}.html`, strip('index.html')) ?? forced()
      if (p.endsWith('/')) return serve(`${p}index.html`) ?? serve(`${strip('/')}.html`) ?? forced()
      if (p.endsWith('.html')) return redirect(p, `${strip('.html')}/`) ?? redirect(`${strip('.html')}/index.html`, `${strip('.html')}/`) ?? forced()
      return forced()
    case 'drop-trailing-slash':
      if (p.endsWith('/index')) {
        if (p === '/index') return serve(p) ?? redirect('/index.html', '/') ?? dropped()
        return serve(p) ?? redirect(`${strip('/index')}.html`, strip('/index')) ?? redirect(`${p}.html`, strip('/index')) ?? dropped()
      }
      if (p.endsWith('/index.html')) {
        if (p === '/index.html') return redirect('/index.html', '/') ?? dropped()
        return redirect(p, strip('/index.html')) ?? redirect(`${strip('/index.html')}.html`, strip('/index.html')) ?? dropped()
      }
      if (p === '/') return serve('/index.html') ?? dropped()
      if (p.endsWith('/')) return redirect(`${strip('/')}.html`, strip('/')) ?? redirect(`${strip('/')}/index.html`, strip('/')) ?? dropped()
      if (p.endsWith('.html')) return redirect(p, strip('.html')) ?? redirect(`${strip('.html')}/index.html`, strip('.html')) ?? dropped()
      return dropped()
  }
  // The exact file, then `p.html`, then `p/` when `p/index.html` exists.
  function fallback(): Resolution | null {
    return serve(p) ?? serve(`${p}.html`) ?? redirect(`${p}/index.html`, `${p}/`)
  }
  function forced(): Resolution | null {
    return serve(p) ?? redirect(`${p}.html`, `${p}/`) ?? redirect(`${p}/index.html`, `${p}/`)
  }
  function dropped(): Resolution | null {
    return serve(p) ?? serve(`${p}.html`) ?? serve(`${p}/index.html`)
  }
}

/** run_worker_first: true, false, or route globs (`*` matches anything; a `!` route excludes and wins). */
export function runsWorkerFirst(config: AssetConfig, pathname: string): boolean {
  if (typeof config.runWorkerFirst === 'boolean') return config.runWorkerFirst
  let matched = false
  for (const route of config.runWorkerFirst) {
    const negated = route.startsWith('!')
    if (!globMatches(negated ? route.slice(1) : route, pathname)) continue
    if (negated) return false
    matched = true
  }
  return matched
}

const compiledGlobs = new Map<string, RegExp>()

function globMatches(glob: string, pathname: string): boolean {
  let pattern = compiledGlobs.get(glob)
  if (!pattern) {
    pattern = new RegExp(`^${glob.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`)
    if (compiledGlobs.size >= 10_000) compiledGlobs.clear()
    compiledGlobs.set(glob, pattern)
  }
  return pattern.test(pathname)
}
