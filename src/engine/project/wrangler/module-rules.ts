// wrangler's module rules (4.86): which files become modules of their own, of which type, and by
// which name. Bundling, an import a text, data or wasm rule matches — by its specifier, so a file
// inside an npm package counts as well as the project's own — stays a separate module named
// `<sha1 of its bytes>-<file name>` (or its path, with preserve_file_names). With
// find_additional_modules (always, with no_bundle) every file under base_dir a rule matches is a
// module named by its path there, and a bundled import of one is left to workerd, so a dynamic
// `import("./lang/" + code + ".js")` finds it at run time.
import {createHash} from 'node:crypto'
import {realpathSync} from 'node:fs'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import type {Plugin} from 'esbuild'
import type {ModuleType} from '../../../protocol/management-api.js'
import {globPattern} from '../../../util/glob.js'
import {isInside, moduleTextProblem, outsideProjectProblem} from '../build-rules.js'
import {nearestPackageDir, packageNameOf, packageRootOf} from './bundle-inputs.js'
import type {WranglerRuleType} from './config.js'

export interface ModuleRule {
  type: WranglerRuleType
  globs: string[]
}

export interface StagedModule {
  name: string
  type: ModuleType
  bytes: Uint8Array
}

/** wrangler's default module rules, applied after the project's own: other JavaScript modules take a rule of the project's. */
export const DEFAULT_RULES: ModuleRule[] = [
  {type: 'Text', globs: ['**/*.txt', '**/*.html', '**/*.sql']},
  {type: 'Data', globs: ['**/*.bin']},
  {type: 'CompiledWasm', globs: ['**/*.wasm', '**/*.wasm?module']},
]

export const MODULE_TYPE: Record<WranglerRuleType, ModuleType> = {
  ESModule: 'esModule',
  CommonJS: 'commonJs',
  Text: 'text',
  Data: 'data',
  CompiledWasm: 'wasm',
}

export type TypeOf = (relative: string) => WranglerRuleType | undefined

/** The type the first matching rule gives a path relative to base_dir (`**` across directories). */
export function ruleTypeOf(rules: readonly ModuleRule[]): TypeOf {
  const compiled = rules.map((rule) => ({type: rule.type, patterns: rule.globs.map((glob) => new RegExp(`^${globPattern(glob)}$`))}))
  return (relative) => compiled.find((rule) => rule.patterns.some((pattern) => pattern.test(relative)))?.type
}

/** Every file under base_dir a rule matches (but the main module, and node_modules), as modules named by their path there. */
export async function additionalModules(
  baseDir: string,
  main: string,
  typeOf: TypeOf,
  refuse: (message: string) => never,
): Promise<Array<StagedModule & {file: string}>> {
  const entries = await readdir(baseDir, {withFileTypes: true, recursive: true})
  const files = entries
    .map((entry) => path.join(entry.parentPath, entry.name))
    .filter((file, index) => entries[index]!.isFile() && file !== main && !path.relative(baseDir, file).split(path.sep).includes('node_modules'))
    .sort()
  const modules: Array<StagedModule & {file: string}> = []
  for (const file of files) {
    const name = toPosix(path.relative(baseDir, file))
    const type = typeOf(name)
    if (!type) continue
    const bytes = await readFile(file)
    const textProblem = moduleTextProblem(MODULE_TYPE[type], bytes)
    if (textProblem) refuse(`${name} ${textProblem}`)
    modules.push({name, type: MODULE_TYPE[type], bytes, file})
  }
  return modules
}

export interface ModuleRulesPluginOptions {
  projectDir: string
  rules: readonly ModuleRule[]
  /** The main module's name: an attached module is imported relative to it. */
  mainName: string
  /** find_additional_modules' files (absolute): imports of them stay imports. */
  additional: ReadonlySet<string>
  preserveFileNames: boolean
  /** Filled with the text, data and wasm modules the bundle imports, by name. */
  attached: Map<string, StagedModule>
}

export function moduleRulesPlugin(options: ModuleRulesPluginOptions): Plugin {
  const {projectDir, rules, mainName, additional, preserveFileNames, attached} = options
  const watched = rules.filter((rule) => additional.size > 0 || !isScriptRule(rule.type))
  const specifierRules = watched.map((rule) => ({type: rule.type, patterns: rule.globs.map((glob) => new RegExp(`^${specifierPattern(glob)}$`))}))
  return {
    name: 'edgeworkers-module-rules',
    setup(build) {
      if (watched.length === 0) return
      // Every plugin callback is a round trip to esbuild's process: only specifiers some rule matches are sent.
      const filter = new RegExp(`^(?:${watched.flatMap((rule) => rule.globs.map(specifierPattern)).join('|')})$`)
      build.onResolve({filter}, async (args) => {
        if ((args.pluginData as {skip?: boolean} | undefined)?.skip) return undefined
        const type = specifierRules.find((rule) => rule.patterns.some((pattern) => pattern.test(args.path)))!.type
        const specifier = args.path.replace(/\?.*$/, '')
        if (additional.has(path.join(args.resolveDir, specifier))) return {path: specifier, external: true}
        if (isScriptRule(type)) return undefined
        const resolved = await build.resolve(specifier, {kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: {skip: true}})
        const file = resolved.errors.length === 0 && resolved.path ? resolved.path : path.join(args.resolveDir, specifier)
        // A relative or absolute import is checked as written: esbuild's resolved path has its symlinks followed already.
        const written = specifier.startsWith('.') || path.isAbsolute(specifier) ? path.resolve(args.resolveDir, specifier) : file
        const problem = containmentProblem(projectDir, written, specifier, args.importer)
        if (problem) return {errors: [{text: `${args.path} ${problem}`}]}
        const bytes = await readFile(file)
        const textProblem = moduleTextProblem(MODULE_TYPE[type], bytes)
        if (textProblem) return {errors: [{text: `${args.path} ${textProblem}`}]}
        const name = preserveFileNames ? path.posix.normalize(specifier) : `${createHash('sha1').update(bytes).digest('hex')}-${path.basename(specifier)}`
        attached.set(name, {name, type: MODULE_TYPE[type], bytes})
        const fromMain = path.posix.relative(path.posix.dirname(mainName), name)
        return {path: fromMain.startsWith('.') ? fromMain : `./${fromMain}`, external: true}
      })
    },
  }
}

function isScriptRule(type: WranglerRuleType): boolean {
  return type === 'ESModule' || type === 'CommonJS'
}

/**
 * Why the file an attached import names may not enter the version, or null: it is one of the
 * project's files, or a file of the npm package the specifier names or the importing file belongs to.
 */
function containmentProblem(projectDir: string, file: string, specifier: string, importer: string): string | null {
  const problem = outsideProjectProblem(projectDir, file)
  if (problem === null || problem === 'does not exist') return problem
  const real = realpathSync(file)
  const name = packageNameOf(specifier)
  // A package's own relative import: its importer is checked with the bundle's inputs (./bundle-inputs.ts).
  const packageRoot = name !== null ? packageRootOf(real, name, new Map()) : isInside(projectDir, importer) ? null : nearestPackageDir(importer)
  return packageRoot !== null && isInside(packageRoot, real) ? null : problem
}

/** A rule glob as esbuild's filter over an import specifier, as wrangler reads it there: `*` and `**` match across "/". */
function specifierPattern(glob: string): string {
  return glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*+/g, '.*')
    .replace(/\?/g, '.')
}

export function toPosix(file: string): string {
  return file.split(path.sep).join('/')
}
