// The conventions operators bring from their other CLIs: `help` and `-h` everywhere, a suggestion for
// a mistyped flag, usage lines with arguments in the order they are typed, and under --json a failure
// that says why on stdout as one JSON object.
import {cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, describe, expect, test} from 'vitest'
import manifest from '../../oclif.manifest.json' with {type: 'json'}
import {CLI_BIN, runCli} from '../support/cli.js'

const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-conventions-'))
afterAll(() => rmSync(dataDir, {recursive: true, force: true}))

describe('help', () => {
  test('`help` lists the topics; `help COMMAND`, `COMMAND --help` and `COMMAND -h` print the same usage', async () => {
    const [top, viaHelp, viaLong, viaShort] = await Promise.all([
      runCli(['help']),
      runCli(['help', 'outbox', 'retry']),
      runCli(['outbox', 'retry', '--help']),
      runCli(['outbox', 'retry', '-h']),
    ])
    expect(top.code).toBe(0)
    expect(top.stdout).toMatch(/^TOPICS\n {2}access-policy/m)
    expect(viaHelp.code).toBe(0)
    expect(viaHelp.stdout).toContain('$ edgeworkers outbox retry')
    expect(viaLong).toEqual(viaHelp)
    expect(viaShort).toEqual(viaHelp)
  })

  // oclif answers -h before it looks the command up, so it holds for every command that does not claim -h itself.
  test('no command claims -h for a flag of its own, and a nested one answers it (exit 0)', async () => {
    const claimed = Object.entries(manifest.commands).flatMap(([id, command]) =>
      Object.values(command.flags).flatMap((flag) => ('char' in flag && flag.char === 'h' ? [id] : [])),
    )
    expect(claimed).toEqual([])
    const nested = await runCli(['service-account', 'credentials', 'delete', '-h'])
    expect(nested.code).toBe(0)
    expect(nested.stdout).toContain('$ edgeworkers service-account credentials delete DEPARTMENT ACCOUNT')
  })

  test('usage lines print arguments in the order they are typed, not alphabetically', async () => {
    const [credentials, runtimeConfig] = await Promise.all([runCli(['service-account', 'credentials', 'put', '-h']), runCli(['runtime-config', 'set', '-h'])])
    expect(credentials.stdout).toContain('$ edgeworkers service-account credentials put DEPARTMENT ACCOUNT')
    expect(runtimeConfig.stdout).toContain('$ edgeworkers runtime-config set DEPARTMENT KEY JSON')
  })
})

describe('mistakes', () => {
  test('a mistyped flag gets the flag it resembles (exit 2)', async () => {
    const result = await runCli(['deploy', './x', '--departmnet', 'sales', '--data-dir', dataDir])
    expect(result).toEqual({code: 2, stdout: '', stderr: 'error: Nonexistent flag: --departmnet; did you mean --department?\n'})
  })

  test('under --json a failure prints {"error": {code, message, exitCode}} on stdout, and its line on stderr', async () => {
    const [usage, missingStore] = await Promise.all([
      runCli(['worker', 'list', '--json', '--bogus', '--data-dir', dataDir]),
      runCli(['worker', 'list', '--json', '--data-dir', dataDir]),
    ])
    expect(usage.code).toBe(2)
    expect(JSON.parse(usage.stdout)).toEqual({error: {code: 'usage', message: 'Nonexistent flag: --bogus', exitCode: 2}})
    expect(usage.stderr).toBe('error: Nonexistent flag: --bogus\n')
    expect(missingStore.code).toBe(4)
    expect(JSON.parse(missingStore.stdout)).toEqual({
      error: {code: 'store_unavailable', message: expect.stringMatching(/does not exist; run `edgeworkers db migrate`$/), exitCode: 4},
    })
  })
})

describe('NODE_ENV', () => {
  // Node developers' shells often say NODE_ENV=development, and test runners say test: oclif would then
  // register tsx to run src/ (four times the CPU of a start, and code that is not the build).
  test('the CLI runs its build whatever NODE_ENV says: it never loads a TypeScript loader', async () => {
    const root = path.dirname(path.dirname(CLI_BIN))
    const copy = mkdtempSync(path.join(tmpdir(), 'edgeworkers-node-env-'))
    try {
      for (const entry of ['bin', 'dist', 'package.json', 'oclif.manifest.json', 'tsconfig.json']) {
        cpSync(path.join(root, entry), path.join(copy, entry), {recursive: true})
      }
      mkdirSync(path.join(copy, 'src', 'commands', 'worker'), {recursive: true})
      writeFileSync(path.join(copy, 'src', 'commands', 'worker', 'list.ts'), 'throw new Error("the sources ran")\n')
      // The copy's tsx records that it was loaded; every other package is the real one.
      mkdirSync(path.join(copy, 'node_modules'))
      for (const entry of readdirSync(path.join(root, 'node_modules'))) {
        if (entry !== 'tsx') symlinkSync(path.join(root, 'node_modules', entry), path.join(copy, 'node_modules', entry))
      }
      const marker = path.join(copy, 'tsx-loaded')
      const tsx = path.join(copy, 'node_modules', 'tsx')
      mkdirSync(tsx, {recursive: true})
      writeFileSync(path.join(tsx, 'package.json'), JSON.stringify({name: 'tsx', exports: {'./esm/api': './api.cjs'}}))
      writeFileSync(path.join(tsx, 'api.cjs'), `require('node:fs').writeFileSync(${JSON.stringify(marker)}, '')\nexports.register = () => () => {}\n`)
      for (const NODE_ENV of ['development', 'test']) {
        const result = await runCli(['worker', 'list', '--json'], {NODE_ENV, EDGEWORKERS_DATA_DIR: dataDir}, path.join(copy, 'bin', 'run.js'))
        expect(result.stdout).toContain('does not exist; run `edgeworkers db migrate`')
        expect(existsSync(marker)).toBe(false)
      }
    } finally {
      rmSync(copy, {recursive: true, force: true})
    }
  })
})
