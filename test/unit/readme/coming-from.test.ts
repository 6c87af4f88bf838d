// README's Commands table and its "Coming from wrangler, kubectl or heroku" table name commands that
// exist, under the names the CLI answers to (aliases included), and the Commands table lists them all.
import {expect, test} from 'vitest'
import manifest from '../../../oclif.manifest.json' with {type: 'json'}
import {commandsTableIds, comingFromCommands} from '../../support/readme-commands.js'

const commands = manifest.commands as Record<string, {aliases?: string[]}>
const answersTo = new Set(Object.entries(commands).flatMap(([id, command]) => [id, ...(command.aliases ?? [])]))
// From @oclif/plugin-autocomplete and @oclif/plugin-help, not this package's manifest.
const PLUGIN_COMMANDS = ['autocomplete', 'help']

test('the Commands table lists every command, and only commands the CLI has', () => {
  const listed = commandsTableIds()
  expect(listed.filter((id) => !answersTo.has(id) && !PLUGIN_COMMANDS.includes(id))).toEqual([])
  // help is the paragraph under the table.
  expect(Object.keys(commands).filter((id) => id !== 'help' && !listed.includes(id))).toEqual([])
})

test('every edgeworkers command the Coming-from table names exists', () => {
  const known = (id: string) => answersTo.has(id) || PLUGIN_COMMANDS.includes(id)
  const named = comingFromCommands('edgeworkers')
  expect(named.length).toBeGreaterThan(20)
  // The command is the longest run of leading words the CLI knows (`help deploy`: help, with an argument).
  const unknown = named.filter((words) => !words.some((_, end) => known(words.slice(0, end + 1).join(':'))))
  expect(unknown.map((words) => words.join(' '))).toEqual([])
})

test("where wrangler's command and ours do the same, the name is wrangler's", () => {
  const same = [
    'deploy',
    'rollback',
    'tail',
    'secret:put',
    'secret:list',
    'secret:delete',
    'init',
    'd1:execute',
    'd1:migrations:apply',
    'queues:list',
    'queues:info',
  ]
  const wrangler = new Set(comingFromCommands('wrangler').map((words) => words.join(':')))
  for (const id of same) expect({id, wrangler: wrangler.has(id), ours: answersTo.has(id)}).toEqual({id, wrangler: true, ours: true})
})
