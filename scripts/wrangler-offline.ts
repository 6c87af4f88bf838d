// wrangler run offline, for the tests' oracle (test/support/wrangler-oracle.ts) and bench/build
// alike: the pinned devDependency, no metrics, no account, and the registry it would ask for a newer
// version a closed local port — nothing is sent anywhere.
import {execFile} from 'node:child_process'
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
