// `npm test` runs the built CLI. `npm ci` already built it (prepare), so build again only when a
// source is newer than the last build: `npm ci && npm test` compiles once, an edit still rebuilds.
import {execSync} from 'node:child_process'
import {existsSync, readdirSync, statSync} from 'node:fs'
import path from 'node:path'

const STAMP = 'dist/.build-stamp'
const INPUTS = ['src', 'package.json', 'tsconfig.json', 'scripts/bundle.mjs']

function newestMtime(entry) {
  const stat = statSync(entry)
  if (!stat.isDirectory()) return stat.mtimeMs
  return Math.max(stat.mtimeMs, ...readdirSync(entry).map((name) => newestMtime(path.join(entry, name))))
}

if (!existsSync(STAMP) || Math.max(...INPUTS.map(newestMtime)) > statSync(STAMP).mtimeMs) {
  execSync('npm run build', {stdio: 'inherit'})
}
