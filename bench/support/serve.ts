// `edgeworkers host serve` as its own process, for benchmarks that measure it from outside or kill
// it: started on a data dir with loopback listeners on free ports, found through the host.json it
// writes (the one of this process: a restart on the same data dir rewrites it), and its one-time
// pairing code asked of `host pairing-code`, as an operator would.
import {type ChildProcess, type StdioOptions, spawn} from 'node:child_process'
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

export interface ServedHost {
  child: ChildProcess
  adminUrl: string
  publicUrl: string
}

/** The environment `host serve` runs in: loopback listeners on free ports, warnings and worse logged, and `env` over them. */
export function serveEnv(env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {...process.env, EDGEWORKERS_HOST__LISTEN: '127.0.0.1:0', EDGEWORKERS_HOST__ADMIN_LISTEN: '127.0.0.1:0', EDGEWORKERS_LOG_LEVEL: 'warn', ...env}
}

/** Starts `bin host serve` on `dataDir`; resolves once it listens. `stdio`: its stdout and stderr (stderr inherited by default). */
export async function serveHost(bin: string, dataDir: string, options: {env?: NodeJS.ProcessEnv; stdio?: StdioOptions} = {}): Promise<ServedHost> {
  const child = spawn(process.execPath, [bin, 'host', 'serve', '--data-dir', dataDir], {
    env: serveEnv(options.env),
    stdio: options.stdio ?? ['ignore', 'ignore', 'inherit'],
  })
  for (;;) {
    if (child.exitCode !== null) throw new Error(`host serve exited ${child.exitCode}`)
    try {
      const info = JSON.parse(readFileSync(path.join(dataDir, 'host.json'), 'utf8')) as {pid: number; adminUrl: string; publicUrl: string}
      if (info.pid === child.pid) return {child, adminUrl: info.adminUrl, publicUrl: info.publicUrl}
    } catch {}
    await sleep(100)
  }
}

/** The host's one-time pairing code, from `bin host pairing-code` on its data dir. */
export function pairingCodeOf(bin: string, dataDir: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const cli = spawn(process.execPath, [bin, 'host', 'pairing-code', '--data-dir', dataDir], {env: serveEnv()})
    let out = ''
    cli.stdout.on('data', (data) => (out += data))
    cli.on('close', (status) => (status === 0 ? resolve(out.trim().split(/\s+/).at(-1)!) : reject(new Error(`pairing-code exited ${status}`))))
  })
}
