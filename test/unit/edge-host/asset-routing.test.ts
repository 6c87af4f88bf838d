// The asset routing rules as Cloudflare documents them (Workers static assets: HTML handling, not
// found handling, run_worker_first, _headers, _redirects), on a fixed set of files.
import {describe, expect, test} from 'vitest'
import {resolveAsset, runsWorkerFirst} from '../../../src/edge-host/assets/routing.js'
import {AssetRulesError, headersFor, matchRedirect, parseHeaders, parseRedirects} from '../../../src/protocol/assets/rules.js'
import type {AssetConfig} from '../../../src/protocol/management-api.js'

const FILES = new Set(['/index.html', '/about.html', '/docs/index.html', '/404.html', '/blog/404.html', '/app.js'])
const exists = (path: string) => FILES.has(path)
const config = (overrides: Partial<AssetConfig> = {}): AssetConfig => ({
  htmlHandling: 'auto-trailing-slash',
  notFoundHandling: 'none',
  runWorkerFirst: false,
  ...overrides,
})
const resolve = (pathname: string, overrides: Partial<AssetConfig> = {}) => resolveAsset(pathname, config(overrides), exists)
const served = (path: string, status = 200) => ({kind: 'asset', path, status})
const redirected = (location: string) => ({kind: 'redirect', location, status: 307})

describe('html_handling', () => {
  test('auto-trailing-slash (the default)', () => {
    expect(resolve('/')).toEqual(served('/index.html'))
    expect(resolve('/index.html')).toEqual(redirected('/'))
    expect(resolve('/about')).toEqual(served('/about.html'))
    expect(resolve('/about.html')).toEqual(redirected('/about'))
    expect(resolve('/about/')).toEqual(redirected('/about'))
    expect(resolve('/docs')).toEqual(redirected('/docs/'))
    expect(resolve('/docs/')).toEqual(served('/docs/index.html'))
    expect(resolve('/docs/index.html')).toEqual(redirected('/docs/'))
    expect(resolve('/app.js')).toEqual(served('/app.js'))
    expect(resolve('/missing')).toBeNull()
  })
  test('force-trailing-slash', () => {
    const force = {htmlHandling: 'force-trailing-slash'} as const
    expect(resolve('/about', force)).toEqual(redirected('/about/'))
    expect(resolve('/about/', force)).toEqual(served('/about.html'))
    expect(resolve('/docs', force)).toEqual(redirected('/docs/'))
    expect(resolve('/app.js', force)).toEqual(served('/app.js'))
  })
  test('drop-trailing-slash', () => {
    const drop = {htmlHandling: 'drop-trailing-slash'} as const
    expect(resolve('/docs/', drop)).toEqual(redirected('/docs'))
    expect(resolve('/docs', drop)).toEqual(served('/docs/index.html'))
    expect(resolve('/about', drop)).toEqual(served('/about.html'))
    expect(resolve('/', drop)).toEqual(served('/index.html'))
  })
  test('none serves exact paths only', () => {
    expect(resolve('/about', {htmlHandling: 'none'})).toBeNull()
    expect(resolve('/about.html', {htmlHandling: 'none'})).toEqual(served('/about.html'))
  })
})

test('not_found_handling: the nearest 404.html with status 404, or index.html for a single-page application', () => {
  expect(resolve('/blog/deep/missing', {notFoundHandling: '404-page'})).toEqual(served('/blog/404.html', 404))
  expect(resolve('/elsewhere', {notFoundHandling: '404-page'})).toEqual(served('/404.html', 404))
  expect(resolve('/settings/profile', {notFoundHandling: 'single-page-application'})).toEqual(served('/index.html'))
})

test('run_worker_first: a boolean or route globs, a "!" route excluding', () => {
  expect(runsWorkerFirst(config({runWorkerFirst: true}), '/app.js')).toBe(true)
  const globs = config({runWorkerFirst: ['/api/*', '!/api/docs/*']})
  expect(['/api/users', '/api/docs/x', '/app.js'].map((path) => runsWorkerFirst(globs, path))).toEqual([true, false, false])
})

test('_redirects: static and dynamic rules, placeholders and splats, a static rule before the first dynamic match, limits', () => {
  const rules = parseRedirects('# comment\n/* /catch-all\n/home / 301\n/blog/:year/:slug /posts/:slug?y=:year\n/docs/* /documentation//:splat 308\n/a /b\n')
  expect(matchRedirect(rules.slice(1), '/home')).toEqual({destination: '/', status: 301})
  expect(matchRedirect(rules, '/home')).toEqual({destination: '/', status: 301})
  expect(matchRedirect(rules, '/blog/2026/hi')).toEqual({destination: '/catch-all', status: 302})
  rules.shift()
  expect(matchRedirect(rules, '/blog/2026/hi')).toEqual({destination: '/posts/hi?y=2026', status: 302})
  expect(matchRedirect(rules, '/docs/a/b')).toEqual({destination: '/documentation/a/b', status: 308})
  expect(matchRedirect(rules, '/none')).toBeNull()
  expect(() => parseRedirects('/x /y 304')).toThrow(new AssetRulesError('_redirects line 1: status 304 is not one of 200, 301, 302, 303, 307, 308'))
  expect(() => parseRedirects(Array.from({length: 101}, (_, index) => `/d${index}/* /x`).join('\n'))).toThrow('more than 100 dynamic redirects')
})

test('_headers: every matching rule applies, repeated names join, "!" detaches (from the response too), placeholders fill in', () => {
  const rules = parseHeaders('/*\n  X-Frame-Options: DENY\n  X-Tag: all\n/docs/:page\n  ! X-Frame-Options\n  X-Tag: :page\n')
  expect(headersFor(rules, 'example.com', '/docs/intro')).toEqual({set: new Map([['x-tag', 'all, intro']]), unset: new Set(['x-frame-options'])})
  expect(headersFor(rules, 'example.com', '/')).toEqual({
    set: new Map([
      ['x-frame-options', 'DENY'],
      ['x-tag', 'all'],
    ]),
    unset: new Set(),
  })
  expect(() => parseHeaders('  X-Orphan: 1')).toThrow('_headers line 1: a header line must follow a URL pattern')
})
