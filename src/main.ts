// The CLI's entry (bin/run.js), bundled with the commands so that they share one @oclif/core. It
// answers `--version` itself and loads oclif only for everything else.
import {existsSync, readFileSync} from 'node:fs'
import {settings} from '@oclif/core/settings'
import {createRequire} from 'node:module'
import os from 'node:os'
import {requireWithCodeCache} from './code-cache.js'
import {packagePath} from './package-root.js'

/**
 * Commands whose start-up is paid most often (cron runs `reconcile` every minute). They run from
 * dist/hot-commands.cjs (./hot-commands.ts), one CommonJS bundle compiled with a V8 code cache:
 * about a third of such a start is compiling JavaScript, which ES modules redo at every start on Node 20.
 */
export const HOT_COMMANDS = ['reconcile'] as const
export type HotCommandId = (typeof HOT_COMMANDS)[number]

/** Runs the command line; `dir` is bin/run.js's URL, from which oclif finds package.json. */
export async function run(dir: string): Promise<void> {
  const argv = process.argv.slice(2)
  // oclif prints its user agent for a leading --version; the line alone is not worth loading oclif.
  if (argv[0] === '--version') {
    process.stdout.write(`${userAgent()}\n`)
    return
  }
  // dist/ is minified: stack traces need the source maps, but reading them costs every start. They
  // are read where a trace may be printed: with EDGEWORKERS_DEBUG, and in the long-running edge host.
  const sourceMaps = Boolean(process.env.EDGEWORKERS_DEBUG) || (argv[0] === 'host' && argv[1] === 'serve') || argv[0] === 'host:serve'
  if (sourceMaps) process.setSourceMapsEnabled(true)
  // The CLI runs its build (dist/) whatever NODE_ENV says: under NODE_ENV=development or test oclif
  // would otherwise load tsx and run src/ (bin/dev.js is the way to run the sources).
  settings.enableAutoTranspile = false
  warnIfWorkingDirectoryGone()
  const hot = HOT_COMMANDS.find((id) => id === argv[0])
  if (hot) {
    const bundle = packagePath('dist', 'hot-commands.cjs')
    // Node maps the stack traces of a file its own loader compiled, not of a vm.Script.
    const {run: runHot} = (sourceMaps ? createRequire(import.meta.url)(bundle) : requireWithCodeCache(bundle, hot, packagePath())) as {
      run(dir: string): Promise<void>
    }
    await runHot(dir)
    return
  }
  await (await import('./cli/execute.js')).execute({dir})
}

/** What oclif's index does at load, which the CLI no longer imports (./cli/execute.ts). */
function warnIfWorkingDirectoryGone(): void {
  try {
    process.cwd()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') process.stderr.write('WARNING: current directory does not exist\n')
  }
}

/** The line oclif's Config builds: `edgeworkers/0.1.0 linux-x64 node-v20.20.2` (`wsl` under WSL outside a container). */
function userAgent(): string {
  const {name, version} = JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as {name: string; version: string}
  const arch = os.arch() === 'ia32' ? 'x86' : os.arch()
  return `${name}/${version} ${isWsl() ? 'wsl' : process.platform}-${arch} node-${process.version}`
}

// The is-wsl and is-docker rules oclif applies.
function isWsl(): boolean {
  if (process.platform !== 'linux') return false
  const microsoft = os.release().toLowerCase().includes('microsoft') || readOr('/proc/version').toLowerCase().includes('microsoft')
  return microsoft && !(existsSync('/.dockerenv') || readOr('/proc/self/cgroup').includes('docker'))
}

function readOr(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}
