// Every wrangler command README's "Coming from wrangler, kubectl or heroku" table names is one the
// installed wrangler (the oracle, a dev dependency) lists in its help. kubectl and heroku are not
// installed here: their columns are checked by reading only.
import {execFile} from 'node:child_process'
import path from 'node:path'
import {promisify} from 'node:util'
import {expect, test} from 'vitest'
import {comingFromCommands} from '../support/readme-commands.js'

const WRANGLER = path.resolve(import.meta.dirname, '../../node_modules/wrangler/bin/wrangler.js')
const run = promisify(execFile)

test('every wrangler command the Coming-from table names is in wrangler --help', {timeout: 120_000}, async () => {
  const named = comingFromCommands('wrangler')
  expect(named.length).toBeGreaterThan(10)
  // One help per group: `wrangler --help` lists top-level commands, `wrangler d1 --help` d1's, and so on.
  const groups = [...new Set(named.map((words) => words.slice(0, -1).join(' ')))]
  const help = new Map(
    await Promise.all(
      groups.map(async (group) => {
        const {stdout} = await run(process.execPath, [WRANGLER, ...group.split(' ').filter(Boolean), '--help'], {
          env: {...process.env, WRANGLER_SEND_METRICS: 'false'},
        })
        return [group, stdout] as const
      }),
    ),
  )
  for (const words of named) {
    const listed = new RegExp(`^ {2}wrangler ${words.join(' ')}( |$)`, 'm').test(help.get(words.slice(0, -1).join(' '))!)
    expect({command: `wrangler ${words.join(' ')}`, listed}).toEqual({command: `wrangler ${words.join(' ')}`, listed: true})
  }
})
