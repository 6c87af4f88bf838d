// Builds dist/: one ES module per command (the oclif manifest's paths), per hook and the CLI entry,
// bundled with their dependencies into shared chunks, so a command start reads a handful of files and
// loads only what its imports reach (each dynamic import() is a separate chunk).
import {build} from 'esbuild'
import {mkdirSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import path from 'node:path'

/** Every command and hook file: a new command is an entry point by existing. */
const sources = (dir) =>
  readdirSync(dir, {recursive: true, encoding: 'utf8'})
    .filter((file) => /\.tsx?$/.test(file) && !file.endsWith('.d.ts'))
    .map((file) => path.join(dir, file))

// Native addons and binaries stay in node_modules, and so do optional packages nobody installs
// (pg-native; react-devtools-core, which Ink loads only with DEV=true; typescript, which oclif
// loads only to run a linked plugin's sources), and unenv with Cloudflare's preset, whose files go
// into Workers' bundles from node_modules.
const EXTERNAL = ['better-sqlite3', 'workerd', 'esbuild', 'pg-native', 'react-devtools-core', 'typescript', 'unenv', '@cloudflare/unenv-preset']

/** zod bundles 40-odd message locales behind `z.locales`; the kit speaks English only (zod's default). */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(build) {
    build.onLoad({filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/}, () => ({contents: "export {default as en} from './en.js'\n", loader: 'js'}))
  },
}

const METAFILE = 'node_modules/.cache/edgeworkers/bundle-meta.json'

/** What both builds share. */
const common = {
  bundle: true,
  platform: 'node',
  // Prefer a package's ES module build: jsonc-parser's `main` is UMD, whose require()s esbuild cannot follow.
  mainFields: ['module', 'main'],
  target: 'node20',
  external: EXTERNAL,
  // oclif and our error handling read class names (error.name), which bundling must not rename.
  keepNames: true,
  // Fewer bytes to decode and parse at every start; the source maps keep stack traces readable.
  minify: true,
  sourcemap: true,
  plugins: [zodEnglishOnly],
  logLevel: 'warning',
}

rmSync('dist', {recursive: true, force: true})
const result = await build({
  ...common,
  entryPoints: ['src/main.ts', ...sources('src/commands'), ...sources('src/hooks')],
  outdir: 'dist',
  outbase: 'src',
  chunkNames: 'chunks/[name]-[hash]',
  splitting: true,
  format: 'esm',
  // Bundled CommonJS packages call require(); an ES module has none of its own.
  banner: {js: "import {createRequire as __createRequire} from 'node:module'; const require = __createRequire(import.meta.url);"},
  metafile: true,
})
// The hot commands (src/main.ts's HOT_COMMANDS) again, as one CommonJS file with everything they
// import, dynamic imports included: main.ts compiles it with a V8 code cache (src/code-cache.ts).
await build({
  ...common,
  entryPoints: ['src/hot-commands.ts'],
  outfile: 'dist/hot-commands.cjs',
  format: 'cjs',
  // A CommonJS module has no import.meta: its URL is the bundle's own file.
  define: {'import.meta.url': '__importMetaUrl'},
  banner: {js: "const __importMetaUrl = require('node:url').pathToFileURL(__filename).href;"},
})
// What each output holds, for bench/start/modules.ts; outside dist/, so it is not shipped.
mkdirSync(path.dirname(METAFILE), {recursive: true})
writeFileSync(METAFILE, JSON.stringify(result.metafile))
