// The edge host the kit is paired with goes away and comes back as another (its data reset, a new
// machine at the same address): through the real CLI against real hosts, every command says so with
// README's exit code, nothing is left failed, and `host pair --replace` moves the kit's Workers to the
// new host, where the next pass redeploys them.
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {request} from 'undici'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {runCli, type CliResult} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'

const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-replace-host-'))
const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir])
let first: TestHost
let second: TestHost | undefined

beforeAll(async () => {
  first = await startTestHost({settings: {shards: 1}})
  for (const args of [
    ['db', 'migrate'],
    ['host', 'pair', first.adminUrl, '--code', first.pairingCode!],
    ['company', 'create', 'Acme', '--id', 'acme'],
    ['department', 'create', 'acme', 'Sales', '--id', 'acme-sales'],
    ['deploy', 'fixtures/workers/hello', '--department', 'acme-sales'],
  ]) {
    const result = await cli(...args)
    expect({args, code: result.code, stderr: result.stderr}).toMatchObject({args, code: 0})
  }
}, 300_000)
afterAll(async () => {
  await second?.stop()
  await first?.stop()
  rmSync(dataDir, {recursive: true, force: true})
})

const oneLine = (result: CliResult, code: number, line: RegExp) => {
  expect({code: result.code, stdout: result.stdout}).toEqual({code, stdout: ''})
  expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
  expect(result.stderr).toMatch(line)
}

test('a host that is down, then back as a host that does not know the pairing, then replaced', {timeout: 600_000}, async () => {
  const secretFile = path.join(dataDir, 'token.txt')
  writeFileSync(secretFile, 'value')
  const adminPort = new URL(first.adminUrl).port
  await first.stop()

  // README: 10 edge host unreachable.
  oneLine(
    await cli('secret', 'put', 'acme-sales', 'API_TOKEN', '--from-file', secretFile),
    10,
    /^error: .*edge host unreachable \(ECONNREFUSED\); nothing was applied/,
  )

  second = await startTestHost({settings: {shards: 1, admin_listen: `127.0.0.1:${adminPort}`}})
  const status = await cli('host', 'status')
  expect(status.code).toBe(6)
  expect(status.stdout).toBe(
    `not paired: the edge host at ${first.adminUrl} does not know this kit's pairing (edge_host_unpaired); pair it again: \`edgeworkers host pair ${first.adminUrl} --code CODE --replace\`\n`,
  )

  // README: 6 refused (unpaired), before anything is written: no version, no row, nothing that pages.
  const outboxBefore = JSON.parse((await cli('outbox', 'list', '--json')).stdout) as unknown[]
  oneLine(
    await cli('deploy', 'fixtures/workers/hello', '--department', 'acme-sales'),
    6,
    /^error: cannot deploy: the edge host at .* does not know this kit's pairing/,
  )
  expect(JSON.parse((await cli('outbox', 'list', '--json')).stdout)).toEqual(outboxBefore)

  // A deploy left to a pass (no-wait) is retried by it, not failed: re-pairing is the fix, not a redeploy.
  const changed = path.join(dataDir, 'hello-v2')
  cpSync('fixtures/workers/hello', changed, {recursive: true})
  writeFileSync(path.join(changed, 'index.js'), readFileSync(path.join(changed, 'index.js'), 'utf8').replace('Hello', 'Hello again'))
  expect((await cli('deploy', changed, '--department', 'acme-sales', '--no-wait')).code).toBe(7)
  await cli('reconcile')
  const rows = JSON.parse((await cli('outbox', 'list', '--operation', 'deploy', '--json')).stdout) as Array<{status: string; last_error_code: string | null}>
  expect(rows.filter((row) => row.status !== 'completed')).toEqual([expect.objectContaining({status: 'pending', last_error_code: 'edge_host_unpaired'})])

  // Another host is not paired over the current one by accident, and the code is not spent.
  oneLine(
    await cli('host', 'pair', second.adminUrl, '--code', second.pairingCode!),
    6,
    /^error: the store is already paired with onprem:\w+ \(.*\); .* --replace/,
  )
  const replaced = await cli('host', 'pair', second.adminUrl, '--code', second.pairingCode!, '--replace', '--json')
  expect(replaced.code, replaced.stderr).toBe(0)
  expect(JSON.parse(replaced.stdout)).toMatchObject({host_url: second.adminUrl, replaced: {hostUrl: first.adminUrl, workers: 1}})

  // Until a pass redeployed the Workers onto the new host, its restore gate refuses new deploys.
  oneLine(await cli('deploy', 'fixtures/workers/hello', '--department', 'acme-sales'), 6, /edge_workers_restore_pending/)
  const pass = await cli('reconcile')
  expect(pass.code, pass.stderr).toBe(0)
  const shown = JSON.parse((await cli('worker', 'show', 'acme-sales', '--json')).stdout) as {url: string}
  const served = async () => (await request(shown.url)).body.text()
  expect(await served()).toMatch(/^Hello (again )?from an Edge Worker!/)
  expect((await cli('host', 'status')).code).toBe(0)
  // The row the old host refused is the new host's now: deploying that project again finishes it.
  const redeploy = await cli('deploy', changed, '--department', 'acme-sales')
  expect(redeploy.code, redeploy.stderr).toBe(0)
  expect(await served()).toMatch(/^Hello again from an Edge Worker!/)
})

test('host unpair ends the pairing: deploys are refused until paired again; unpairing again is not found', {timeout: 300_000}, async () => {
  const unpaired = await cli('host', 'unpair')
  expect(unpaired.code, unpaired.stderr).toBe(0)
  expect(unpaired.stdout).toMatch(/^unpaired onprem:\w+ \(http:\/\/127\.0\.0\.1:\d+\)\n$/)
  oneLine(await cli('deploy', 'fixtures/workers/hello', '--department', 'acme-sales'), 6, /^error: cannot deploy: the store is not paired/)
  oneLine(await cli('host', 'unpair'), 5, /^error: the store is not paired with an edge host\n$/)
})
