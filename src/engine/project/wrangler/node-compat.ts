// Node.js compatibility in a bundle, as wrangler (4.86) builds it. Which mode a Worker gets follows
// from its compatibility date and flags (wrangler's rule):
//   v2    nodejs_compat from 2024-09-23 on (or nodejs_compat_v2): Cloudflare's unenv preset, pinned
//         to wrangler's version, maps each Node.js module to workerd's own or to unenv's polyfill
//         (`node:os` before workerd had it), injects `process` and the like as globals, and turns a
//         CommonJS `require("events")` into an import workerd can link;
//   v1    nodejs_compat before that date: `node:*` and the bare built-ins are workerd's own;
//   als   nodejs_als alone: `node:async_hooks` is workerd's own;
//   none  a Node.js built-in is refused at build.
// The polyfills are read from the kit's own unenv packages under the virtual namespace
// `edgeworkers-unenv:<package>/<file>`, so the bundle and its source map never name where the kit
// is installed: the same project gives the same bytes wherever it and the kit live.
import {readFileSync} from 'node:fs'
import {builtinModules, createRequire} from 'node:module'
import path from 'node:path'
import type {Metafile, OnResolveArgs, OnResolveResult, Plugin, PluginBuild} from 'esbuild'

export type NodeCompatMode = 'v2' | 'v1' | 'als' | null

const V2_FROM = '2024-09-23'
const UNENV_NAMESPACE = 'edgeworkers-unenv'
const REQUIRED_BUILTIN_NAMESPACE = 'edgeworkers-required-builtin'
const REQUIRED_SHIM_NAMESPACE = 'edgeworkers-required-shim'
const INJECT_PREFIX = `${UNENV_NAMESPACE}-inject:`
/** The packages whose files a v2 bundle may take from the kit, and so the SBOM may name. */
const UNENV_PACKAGES = ['unenv', '@cloudflare/unenv-preset'] as const

const kitRequire = createRequire(import.meta.url)

export function nodeCompatModeOf(compatibilityDate: string, flags: readonly string[]): NodeCompatMode {
  const compat = flags.includes('nodejs_compat')
  if (flags.includes('nodejs_compat_v2') || (compat && compatibilityDate >= V2_FROM && !flags.includes('no_nodejs_compat_v2'))) return 'v2'
  if (compat) return 'v1'
  return flags.includes('nodejs_als') ? 'als' : null
}

/** What esbuild is given for the mode: modules left to workerd, and plugins. */
export async function nodeCompatBuildOptions(
  mode: NodeCompatMode,
  compatibilityDate: string,
  flags: readonly string[],
): Promise<{external: string[]; plugins: Plugin[]}> {
  if (mode === 'v1') return {external: ['node:*', ...builtinModules], plugins: []}
  if (mode === 'als') return {external: ['node:async_hooks', 'async_hooks'], plugins: []}
  if (mode === null) return {external: [], plugins: []}
  return {external: [], plugins: [await unenvPlugin(compatibilityDate, flags)]}
}

/** Whether a metafile input is one of the kit's polyfill files rather than a file of the project. */
export function isPolyfillInput(input: string): boolean {
  return input.startsWith(`${UNENV_NAMESPACE}:`) || input.startsWith(REQUIRED_BUILTIN_NAMESPACE) || input.startsWith(REQUIRED_SHIM_NAMESPACE)
}

/** The kit's polyfill packages the bundle took files from, with their installed versions. */
export function polyfillPackagesOf(metafile: Metafile): Map<string, string> {
  const used = new Map<string, string>()
  for (const input of Object.keys(metafile.inputs)) {
    if (!input.startsWith(`${UNENV_NAMESPACE}:`)) continue
    const name = UNENV_PACKAGES.find((candidate) => input.startsWith(`${UNENV_NAMESPACE}:${candidate}/`))
    if (name && !used.has(name)) used.set(name, packageVersion(name))
  }
  return used
}

async function unenvPlugin(compatibilityDate: string, flags: readonly string[]): Promise<Plugin> {
  const {defineEnv} = await import('unenv')
  const {getCloudflarePreset, nonPrefixedNodeModules} = await import('@cloudflare/unenv-preset')
  const {alias, inject, external, polyfill} = defineEnv({
    presets: [getCloudflarePreset({compatibilityDate, compatibilityFlags: [...flags]})],
    npmShims: true,
  }).env
  const roots = UNENV_PACKAGES.map((name) => ({name, root: path.dirname(kitRequire.resolve(`${name}/package.json`))}))
  const virtual = (file: string): OnResolveResult => {
    const owner = roots.find(({root}) => file.startsWith(`${root}${path.sep}`))
    if (!owner) return {path: file}
    return {path: `${owner.name}/${path.relative(owner.root, file).split(path.sep).join('/')}`, namespace: UNENV_NAMESPACE, pluginData: file}
  }
  // As wrangler: an alias the kit cannot resolve is left to esbuild's own resolution.
  const resolvedAlias = new Map<string, string>()
  for (const [name, target] of Object.entries(alias)) {
    // wrangler keeps the project's own `debug` package rather than unenv's no-op stub.
    if (name === 'debug') continue
    try {
      resolvedAlias.set(name, kitRequire.resolve(target))
    } catch {}
  }
  const builtin = new RegExp(`^(${nonPrefixedNodeModules.join('|')}|node:.+)$`)
  const aliased = new RegExp(`^(${[...resolvedAlias.keys()].map(escapeRegExp).join('|')})$`)
  const injected = groupInjects(inject)

  return {
    name: 'edgeworkers-unenv',
    setup(build: PluginBuild) {
      build.initialOptions.inject = [
        ...(build.initialOptions.inject ?? []),
        ...[...injected.keys()].map((specifier) => `${INJECT_PREFIX}${specifier}`),
        ...polyfill.map((specifier) => `${INJECT_PREFIX}${specifier}`),
      ]
      // A CommonJS require() of a built-in becomes an import, which workerd links.
      build.onResolve({filter: builtin}, (args) => (args.kind === 'require-call' ? {path: args.path, namespace: REQUIRED_BUILTIN_NAMESPACE} : undefined))
      build.onLoad({filter: /.*/, namespace: REQUIRED_BUILTIN_NAMESPACE}, (args) => ({
        contents: `import libDefault from ${JSON.stringify(args.path)};\nmodule.exports = libDefault;\n`,
        loader: 'js',
      }))
      build.onResolve({filter: aliased}, (args) => {
        const target = alias[args.path]!
        if (args.kind === 'require-call' && /^unenv\/(npm|mock)\//.test(target)) return {path: args.path, namespace: REQUIRED_SHIM_NAMESPACE}
        const resolved = resolvedAlias.get(args.path)!
        return path.isAbsolute(resolved) ? virtual(resolved) : {path: resolved, external: external.includes(target)}
      })
      build.onLoad({filter: /.*/, namespace: REQUIRED_SHIM_NAMESPACE}, (args) => ({
        contents: `import * as esm from ${JSON.stringify(alias[args.path])};\nmodule.exports = Object.entries(esm).filter(([k]) => k !== 'default').reduce((cjs, [k, value]) => Object.defineProperty(cjs, k, {value, enumerable: true}), 'default' in esm ? esm.default : {});\n`,
        loader: 'js',
      }))
      build.onResolve({filter: new RegExp(`^${escapeRegExp(INJECT_PREFIX)}`)}, (args) => {
        const specifier = args.path.slice(INJECT_PREFIX.length)
        return injected.has(specifier)
          ? {path: `globals/${specifier}`, namespace: UNENV_NAMESPACE, pluginData: {inject: specifier}}
          : virtual(kitRequire.resolve(specifier))
      })
      // Imports inside the polyfills resolve from the kit's packages and stay in the virtual namespace.
      build.onResolve({filter: /.*/, namespace: UNENV_NAMESPACE}, async (args: OnResolveArgs) => {
        const result = await build.resolve(args.path, {kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, namespace: 'file'})
        if (result.errors.length > 0) return {errors: result.errors}
        return result.external || result.namespace !== 'file' ? result : virtual(result.path)
      })
      build.onLoad({filter: /.*/, namespace: UNENV_NAMESPACE}, (args) => {
        const data = args.pluginData as string | {inject: string}
        if (typeof data === 'string') return {contents: readFileSync(data), loader: 'js', resolveDir: path.dirname(data)}
        // The module that sets the globals unenv injects (`process`, …) from the polyfill that provides them.
        const names = injected.get(data.inject)!
        const imports = names.map(({exportName, localName}) => (exportName === localName ? exportName : `${exportName} as ${localName}`))
        const assignments = names.map(({globalName, localName}) => `globalThis.${globalName} = ${localName};`)
        return {
          contents: `import {${imports.join(', ')}} from ${JSON.stringify(data.inject)};\n${assignments.join('\n')}\n`,
          loader: 'js',
          resolveDir: roots[0]!.root,
        }
      })
    },
  }
}

interface InjectedName {
  globalName: string
  exportName: string
  localName: string
}

/** unenv's inject table grouped by the module the globals come from. */
function groupInjects(inject: Record<string, string | readonly string[]>): Map<string, InjectedName[]> {
  const bySpecifier = new Map<string, InjectedName[]>()
  for (const [globalName, from] of Object.entries(inject)) {
    const [specifier, exportName, localName] = typeof from === 'string' ? [from, 'default', 'defaultExport'] : [from[0]!, from[1]!, from[1]!]
    bySpecifier.set(specifier, [...(bySpecifier.get(specifier) ?? []), {globalName, exportName, localName}])
  }
  return bySpecifier
}

function packageVersion(name: string): string {
  return (JSON.parse(readFileSync(kitRequire.resolve(`${name}/package.json`), 'utf8')) as {version: string}).version
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
