// Static assets: requests/s of a 10 KiB asset served by the edge host's data plane (an assets-only
// wrangler site deployed through the CLI), by `wrangler dev` (wrangler from npm, offline) running the
// same project, and by nginx (Debian's package) serving the same directory — in one run,
// interleaved (the order rotating each round), ROUNDS rounds of SECONDS each after one unmeasured
// warm-up round (a cold host's first seconds run before V8 has optimised its hot path); medians and
// the host's ratios to each. The load generator is ../host/load.ts (its own process, keep-alive connections).
//
//   node --import tsx bench/assets/run.ts [--seconds 5] [--connections 16] [--rounds 5]
import {spawn, spawnSync} from 'node:child_process'
import {createServer} from 'node:net'
import {chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {runCli} from '../support/cli.js'
import {startBenchHost} from '../support/host.js'
import {log, machineLoad, median} from '../support/stats.js'
import {startWranglerDev} from '../../scripts/wrangler-offline.js'

const {values} = parseArgs({
  options: {seconds: {type: 'string', default: '5'}, connections: {type: 'string', default: '16'}, rounds: {type: 'string', default: '5'}},
})
const SECONDS = Number(values.seconds)
const CONNECTIONS = Number(values.connections)
const ROUNDS = Number(values.rounds)
const LOAD = fileURLToPath(new URL('../host/load.ts', import.meta.url))

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-assets-'))
// nginx's workers run as an unprivileged user: they must be able to read the site.
chmodSync(root, 0o755)
const site = path.join(root, 'site')
mkdirSync(path.join(site, 'public'), {recursive: true})
writeFileSync(path.join(site, 'wrangler.toml'), 'name = "bench"\ncompatibility_date = "2026-04-01"\n[assets]\ndirectory = "public"\n')
writeFileSync(path.join(site, 'public', 'asset.bin'), Buffer.alloc(10 * 1024, 7))
const dataDir = path.join(root, 'kit')
const cli = async (...args: string[]) => {
  const result = await runCli([...args, '--data-dir', dataDir])
  if (result.code !== 0) throw new Error(`${args.join(' ')}: ${result.stderr}`)
  return result.stdout
}

const host = await startBenchHost({settings: {shards: 1}})
await cli('db', 'migrate')
await cli('host', 'pair', host.adminUrl, '--code', host.pairingCode!)
await cli('company', 'create', 'Acme', '--id', 'acme')
await cli('department', 'create', 'acme', 'site', '--id', 'site')
const {url} = JSON.parse(await cli('deploy', site, '--department', 'site', '--json')) as {url: string}
const hostUrl = new URL('asset.bin', url).toString()

// wrangler dev starts once the deploy has read the project: its state (.wrangler/) lands there.
const wrangler = await startWranglerDev(site, path.join(root, 'wrangler-home'))
const wranglerUrl = `${wrangler.url}/asset.bin`

// A port the OS picked a moment ago, for nginx, which cannot report the one it bound.
const nginxPort = await new Promise<number>((resolve) => {
  const probe = createServer().listen(0, '127.0.0.1', () => {
    const {port} = probe.address() as {port: number}
    probe.close(() => resolve(port))
  })
})
const nginxConf = path.join(root, 'nginx.conf')
writeFileSync(
  nginxConf,
  `worker_processes 1;\npid ${root}/nginx.pid;\nerror_log ${root}/nginx-error.log;\ndaemon off;\nevents {worker_connections 1024;}\n` +
    `http {access_log off; etag on; sendfile on; keepalive_requests 1000000; client_body_temp_path ${root}/body; proxy_temp_path ${root}/proxy; ` +
    `fastcgi_temp_path ${root}/fcgi; uwsgi_temp_path ${root}/uwsgi; scgi_temp_path ${root}/scgi; ` +
    `server {listen 127.0.0.1:${nginxPort}; root ${path.join(site, 'public')};}}\n`,
)
const nginx = spawn('nginx', ['-c', nginxConf, '-p', root], {stdio: 'ignore'})
process.once('exit', () => nginx.kill('SIGTERM'))
const nginxUrl = `http://127.0.0.1:${nginxPort}/asset.bin`
for (let tries = 0; spawnSync('curl', ['-sf', '-o', '/dev/null', nginxUrl]).status !== 0; tries++) {
  if (tries > 50) throw new Error(`nginx did not start: ${readFileSync(path.join(root, 'nginx-error.log'), 'utf8').slice(-300)}`)
  await new Promise((resolve) => setTimeout(resolve, 100))
}

function load(target: string): Promise<{rps: number; p99Ms: number; failures: number}> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', LOAD, target, String(CONNECTIONS), String(SECONDS)], {stdio: ['ignore', 'pipe', 'inherit']})
    let out = ''
    child.stdout.on('data', (chunk) => (out += chunk))
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load exited ${code}`))))
  })
}

type Subject = 'host' | 'wrangler' | 'nginx'
const SUBJECTS: Subject[] = ['host', 'wrangler', 'nginx']
const URLS: Record<Subject, string> = {host: hostUrl, wrangler: wranglerUrl, nginx: nginxUrl}
const rps: Record<Subject, number[]> = {host: [], wrangler: [], nginx: []}
const toWrangler: number[] = []
const toNginx: number[] = []
try {
  for (const which of SUBJECTS) await load(URLS[which])
  for (let round = 1; round <= ROUNDS; round++) {
    // Interleaved, the order rotating, so drift in the machine's load falls on all alike.
    const order = SUBJECTS.map((_, index) => SUBJECTS[(index + round) % SUBJECTS.length]!)
    const results = {} as Record<Subject, {rps: number; failures: number}>
    for (const which of order) results[which] = await load(URLS[which])
    if (SUBJECTS.some((which) => results[which].failures > 0)) throw new Error(`failures: ${JSON.stringify(results)}`)
    for (const which of SUBJECTS) rps[which].push(results[which].rps)
    toWrangler.push(results.host.rps / results.wrangler.rps)
    toNginx.push(results.host.rps / results.nginx.rps)
    log(`round ${round}: ${SUBJECTS.map((which) => `${which} ${results[which].rps.toFixed(0)} rps`).join(', ')}`)
  }
  console.log(
    `| 10 KiB asset, ${CONNECTIONS} connections, ${ROUNDS}×${SECONDS} s interleaved | host ${median(rps.host).toFixed(0)} rps | wrangler dev ${median(rps.wrangler).toFixed(0)} rps | nginx ${median(rps.nginx).toFixed(0)} rps | host ÷ wrangler dev ${median(toWrangler).toFixed(2)}× | host ÷ nginx ${median(toNginx).toFixed(2)}× | ${machineLoad()} |`,
  )
} finally {
  nginx.kill('SIGTERM')
  await wrangler.stop()
  await host.stop()
  rmSync(root, {recursive: true, force: true})
}
