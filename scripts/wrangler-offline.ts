// wrangler run offline — the pinned devDependency, no metrics, no account, and the registry it would
// ask for a newer version a closed local port: nothing is sent anywhere. Its own build (`deploy
// --dry-run --outdir`) and `wrangler dev`, for the tests' oracles (test/support/wrangler-oracle.ts,
// test/assets/wrangler-dev.test.ts) and the benches (bench/build, bench/assets) alike.
import {execFile, spawn} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

const WRANGLER_BIN = fileURLToPath(new URL('../node_modules/wrangler/bin/wrangler.js', import.meta.url))

/** The environment wrangler runs offline in: nothing is sent anywhere. */
function offlineWranglerEnv(home: string): NodeJS.ProcessEnv {
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

/** How long `wrangler dev` may take to say it is ready (it bundles, then starts workerd). */
const WRANGLER_DEV_START_MS = 90_000

export interface WranglerDev {
  /** Where `wrangler dev` listens, e.g. http://127.0.0.1:41234 */
  url: string
  stop(): Promise<void>
}

/**
 * Starts `wrangler dev` on the project in `dir` — offline, on a port the OS picks, no inspector —
 * and resolves once it says it is ready. Its state (.wrangler/) goes into the project directory.
 */
export function startWranglerDev(dir: string, home: string): Promise<WranglerDev> {
  const args = [WRANGLER_BIN, 'dev', '--ip', '127.0.0.1', '--port', '0', '--inspector-port', '0', '--show-interactive-dev-session=false']
  const child = spawn(process.execPath, args, {cwd: dir, env: offlineWranglerEnv(home), stdio: ['ignore', 'pipe', 'pipe'], detached: true})
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGTERM')
    await exited
  }
  let output = ''
  return new Promise<WranglerDev>((resolve, reject) => {
    // Never left running past a test: one that is not ready in time is stopped (and so rejects).
    const deadline = setTimeout(() => void stop(), WRANGLER_DEV_START_MS)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const ready = /Ready on (http:\/\/[\d.]+:\d+)/.exec(output)
      if (!ready) return
      clearTimeout(deadline)
      resolve({url: ready[1]!, stop})
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    void exited.then(() => {
      clearTimeout(deadline)
      reject(new Error(`wrangler dev exited before it was ready in ${dir}:\n${output}`))
    })
  })
}
