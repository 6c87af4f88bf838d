// README's exit-code table is the contract scripts and monitors rely on: walk it row by row against
// the codes the CLI exits with (ExitCode) and the error kinds that map to each (exitCodeFor).
import {readFileSync} from 'node:fs'
import {expect, test} from 'vitest'
import {ExitCode, exitCodeFor} from '../../../src/cli/exit-codes.js'
import type {KitErrorCode} from '../../../src/errors.js'

const readme = readFileSync('README.md', 'utf8')
const section = readme.slice(readme.indexOf('## Exit codes'), readme.indexOf('\n## ', readme.indexOf('## Exit codes') + 1))
const rows = new Map([...section.matchAll(/^\| (\d+) \| (.+) \|$/gm)].map((match) => [Number(match[1]), match[2]!]))

/** The error kinds each row's wording names. */
const NAMED: Record<number, KitErrorCode[]> = {
  1: ['internal'],
  2: ['usage'],
  3: ['config_invalid'],
  4: ['store_unavailable', 'schema_mismatch'],
  5: ['not_found'],
  6: ['conflict', 'gate_closed', 'unpaired'],
  7: ['pending'],
  8: ['failed'],
  9: ['uncertain'],
  10: ['host_unreachable', 'host_error'],
}

test('README lists every exit code the CLI has, in order, and no other', () => {
  expect([...rows.keys()]).toEqual(Object.values(ExitCode).sort((a, b) => a - b))
})

test.each([...rows.entries()])('row %i: the error kinds its wording names exit with it', (code, meaning) => {
  for (const kind of NAMED[code] ?? []) expect({kind, exit: exitCodeFor[kind]}).toEqual({kind, exit: code})
  const wording: Record<number, RegExp> = {
    4: /store unavailable/,
    5: /not found/,
    6: /unpaired/,
    10: /unreachable/,
    13: /needs attention/,
  }
  if (wording[code]) expect(meaning).toMatch(wording[code]!)
})

test('every error kind exits with a code of the table', () => {
  for (const [kind, exit] of Object.entries(exitCodeFor)) expect({kind, listed: rows.has(exit)}).toEqual({kind, listed: true})
})
