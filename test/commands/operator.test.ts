// What an operator meets at the terminal, through the real CLI against a real edge host: one-line
// errors that say what to do (with their exact wording and exit codes), durations written as people
// write them, --json on reporting commands, and log lines in the format asked for.
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, describe, expect, test} from 'vitest'
import {runCli, type CliResult} from '../support/cli.js'
import {startTestHost, type TestHost} from '../support/host.js'

const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-operator-'))
const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir])
let host: TestHost

beforeAll(async () => {
  host = await startTestHost({settings: {shards: 1}})
  expect((await cli('db', 'migrate')).code).toBe(0)
})
afterAll(async () => {
  await host?.stop()
  rmSync(dataDir, {recursive: true, force: true})
})

const oneLineError = (result: CliResult, code: number, line: string) =>
  expect({code: result.code, stdout: result.stdout, stderr: result.stderr}).toEqual({code, stdout: '', stderr: `${line}\n`})

describe('before pairing', () => {
  test('a mistyped command gets a suggestion and exit 2; a word that resembles nothing, the help hint', async () => {
    const [typo, typoWithWordArgument, subcommand, subcommandWithArgument, nothing] = await Promise.all([
      runCli(['deplyo', './x']),
      runCli(['deplyo', 'chat-ws']),
      runCli(['fence', 'beginn']),
      runCli(['secret', 'lst', 'sales']),
      runCli(['xyzzy']),
    ])
    oneLineError(typo, 2, 'error: "deplyo" is not an edgeworkers command; did you mean "deploy"?')
    oneLineError(typoWithWordArgument, 2, 'error: "deplyo" is not an edgeworkers command; did you mean "deploy"?')
    oneLineError(subcommandWithArgument, 2, 'error: "secret lst" is not an edgeworkers command; did you mean "secret list"?')
    oneLineError(subcommand, 2, 'error: "fence beginn" is not an edgeworkers command; did you mean "fence begin"?')
    oneLineError(nothing, 2, 'error: "xyzzy" is not an edgeworkers command; run "edgeworkers help" for the list')
  })

  test('config typos are all named, each with its likely key (exit 3)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-operator-config-'))
    writeFileSync(path.join(dir, 'edgeworkers.toml'), 'loglevel = "debug"\nfoo = 1\n[deploy]\nlease_second = 5\n')
    const result = await runCli(['config', 'show', '--data-dir', dir])
    oneLineError(
      result,
      3,
      `error: invalid setting deploy: unknown key lease_second (did you mean lease_seconds?); (top level): unknown keys loglevel (did you mean log_level?), foo (flags, EDGEWORKERS_* environment or ${dir}/edgeworkers.toml)`,
    )
    rmSync(dir, {recursive: true, force: true})
  })

  test('a duration that is not one is a usage error naming the accepted forms', async () => {
    oneLineError(await cli('fence', 'begin', '--ttl', '10x'), 2, 'error: Parsing --ttl: "10x" is not a duration: write 90, 90s, 10m, 1h or 1h30m')
    oneLineError(await cli('reconcile', '--watch', '--interval', '2h'), 2, 'error: Parsing --interval: 2h is longer than 3600 s')
  })

  test('pairing with the data-plane address says which address to use instead (exit 2), and pairs nothing', async () => {
    const result = await cli('host', 'pair', host.publicUrl, '--code', host.pairingCode!)
    oneLineError(
      result,
      2,
      `error: ${host.publicUrl} is an edge host's data plane (it answered like a Worker URL), not its management listener: pair with the admin address \`host serve\` prints (setting host.admin_listen, default http://127.0.0.1:8788)`,
    )
    expect((await cli('host', 'status', '--json')).stdout).toContain('"paired": false')
  })
})

describe('paired with a real host', () => {
  beforeAll(async () => {
    expect((await cli('host', 'pair', host.adminUrl, '--code', host.pairingCode!)).code).toBe(0)
    expect((await cli('company', 'create', 'Acme', '--id', 'acme')).code).toBe(0)
    expect((await cli('department', 'create', 'acme', 'Sales', '--id', 'sales')).code).toBe(0)
  })

  test('a manifest typo names the key and the key it resembles; a missing project dir is one line, exit 2; nothing written', async () => {
    const project = mkdtempSync(path.join(tmpdir(), 'edgeworkers-operator-project-'))
    writeFileSync(path.join(project, 'index.js'), 'export default {fetch() { return new Response("x") }}\n')
    writeFileSync(
      path.join(project, 'edgeworker.json'),
      JSON.stringify({name: 'x', main: 'index.js', modules: ['index.js'], compatibiltyDate: '2026-11-01', builderPolicy: 'department-worker-project-v2.9'}),
    )
    oneLineError(
      await cli('deploy', project, '--department', 'sales'),
      2,
      'error: edgeworker.json: unknown key "compatibiltyDate" (did you mean "compatibilityDate"?)',
    )
    oneLineError(
      await cli('deploy', path.join(project, 'nope'), '--department', 'sales'),
      2,
      `error: project directory ${path.join(project, 'nope')} does not exist`,
    )
    expect(JSON.parse((await cli('outbox', 'list', '--json')).stdout)).toEqual([])
    rmSync(project, {recursive: true, force: true})
  })

  test('fence begin takes 10m; orphan-report takes --json and its table says KEY VALUE', async () => {
    const begun = await cli('fence', 'begin', '--ttl', '10m', '--json')
    expect(begun.code).toBe(0)
    const fence = JSON.parse(begun.stdout) as {id: string; ttlSeconds: number}
    expect(fence.ttlSeconds).toBe(600)
    expect((await cli('fence', 'end', fence.id)).code).toBe(0)

    const [json, table] = await Promise.all([cli('orphan-report', '--json'), cli('orphan-report', '--table')])
    expect(json.code).toBe(0)
    expect(JSON.parse(json.stdout)).toMatchObject({listed: 0, unowned: 0, worker_rows: 0})
    expect(table.stdout.split('\n')[0]).toMatch(/^KEY\s+VALUE$/)
    const both = await cli('orphan-report', '--json', '--table')
    expect(both.stderr).toBe('error: --json=true cannot also be provided when using --table\n')
    // Under --json the failure is also one JSON object on stdout.
    expect(JSON.parse(both.stdout)).toEqual({error: {code: 'usage', message: '--json=true cannot also be provided when using --table', exitCode: 2}})
    expect(both.code).toBe(2)
  })

  test('logs: human lines or JSON lines as asked, never both; --quiet silences warnings', async () => {
    // A pass with host_reconcile over a store whose host is fine logs info lines only; ask for them.
    const human = await cli('reconcile', '--log-format', 'human', '--verbose')
    const json = await cli('reconcile', '--log-format', 'json')
    const quiet = await cli('reconcile', '--log-format', 'json', '--quiet')
    for (const result of [human, json, quiet]) expect(result.code).toBe(0)
    const humanLines = human.stderr.trimEnd().split('\n')
    expect(humanLines.length).toBeGreaterThan(3)
    for (const line of humanLines) expect(line).toMatch(/^\[\d\d:\d\d:\d\d\] (DEBUG|INFO|WARN|ERROR): Edge Worker /)
    const jsonLines = json.stderr.trimEnd().split('\n')
    const sameEvent = (message: string) => message.replace(/duration_ms=\d+/, 'duration_ms=N')
    expect(jsonLines.map((line) => sameEvent((JSON.parse(line) as {msg: string}).msg))).toEqual(
      humanLines.filter((line) => !line.includes('DEBUG')).map((line) => sameEvent(line.replace(/^\[[^\]]+\] [A-Z]+: /, ''))),
    )
    expect(quiet.stderr).toBe('')
  })
})
