// Static assets, redeploy cost: a 1,000-file site (1 KiB each) deployed through the CLI, then again
// with one file changed. The kit reaches the host's management API through a counting TCP proxy, so
// the figures are the bytes the kit really sent to the host for each deploy (requests, headers,
// base64 bodies and all), next to the asset files and bytes the deploy task says it sent.
//
//   node --import tsx bench/assets/delta.ts [--files 1000]
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {createConnection, createServer, type AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {runCli} from '../support/cli.js'
import {startBenchHost} from '../support/host.js'
import {machineLoad} from '../support/stats.js'

const {values} = parseArgs({options: {files: {type: 'string', default: '1000'}}})
const FILES = Number(values.files)

const root = mkdtempSync(path.join(tmpdir(), 'edgeworkers-bench-assets-delta-'))
const site = path.join(root, 'site')
mkdirSync(path.join(site, 'public'), {recursive: true})
writeFileSync(path.join(site, 'wrangler.toml'), 'name = "delta"\ncompatibility_date = "2026-04-01"\n[assets]\ndirectory = "public"\n')
const fileOf = (index: number) => path.join(site, 'public', `page-${index}.html`)
for (let index = 0; index < FILES; index++) writeFileSync(fileOf(index), `<p>page ${index}</p>\n${'x'.repeat(1000)}\n`)
const dataDir = path.join(root, 'kit')
const cli = async (...args: string[]) => {
  const result = await runCli([...args, '--data-dir', dataDir])
  if (result.code !== 0) throw new Error(`${args.join(' ')}: ${result.stderr}`)
  return result
}

const host = await startBenchHost({settings: {shards: 1}})
const adminPort = Number(new URL(host.adminUrl).port)
let sentToHost = 0
const proxy = createServer((client) => {
  const upstream = createConnection({host: '127.0.0.1', port: adminPort})
  client.on('data', (chunk: Buffer) => (sentToHost += chunk.length))
  client.pipe(upstream).pipe(client)
  const close = () => (client.destroy(), upstream.destroy())
  client.on('error', close).on('close', close)
  upstream.on('error', close).on('close', close)
})
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`

interface DeployFigures {
  wireBytes: number
  assetFiles: number
  assetBytes: number
}

async function deploy(): Promise<DeployFigures> {
  const before = sentToHost
  const {stderr} = await cli('deploy', site, '--department', 'site', '--json')
  const sent = stderr
    .split('\n')
    .filter((line) => line.includes('asset files the host lacked were sent'))
    .map((line) => JSON.parse(line) as {assetFiles: number; assetBytes: number})
    .at(-1)
  if (!sent) throw new Error(`the deploy did not report the asset files it sent:\n${stderr}`)
  return {wireBytes: sentToHost - before, assetFiles: sent.assetFiles, assetBytes: sent.assetBytes}
}

try {
  await cli('db', 'migrate')
  await cli('host', 'pair', proxyUrl, '--code', host.pairingCode!)
  await cli('company', 'create', 'Acme', '--id', 'acme')
  await cli('department', 'create', 'acme', 'site', '--id', 'site')
  const first = await deploy()
  const changed = `<p>page 7, changed</p>\n`
  writeFileSync(fileOf(7), changed)
  const second = await deploy()
  console.log('| deploy | asset files sent | asset bytes sent | bytes kit → host (wire) |')
  console.log('|---|---|---|---|')
  console.log(`| first, ${FILES} files | ${first.assetFiles} | ${first.assetBytes} | ${first.wireBytes} |`)
  console.log(`| again, 1 file changed (${Buffer.byteLength(changed)} bytes) | ${second.assetFiles} | ${second.assetBytes} | ${second.wireBytes} |`)
  console.log(`(${machineLoad()})`)
} finally {
  proxy.close()
  await host.stop()
  rmSync(root, {recursive: true, force: true})
}
