// The commands README's tables name: the Commands table and the "Coming from wrangler, kubectl or
// heroku" table, read as command paths (`secret put\|list` is two: secret put, secret list).
import {readFileSync} from 'node:fs'
import path from 'node:path'

const README = readFileSync(path.resolve(import.meta.dirname, '../../README.md'), 'utf8')

/** The text between `<!-- NAME:start -->` and `<!-- NAME:end -->`. */
function between(name: string): string {
  const start = README.indexOf(`<!-- ${name}:start -->`)
  const end = README.indexOf(`<!-- ${name}:end -->`)
  if (start < 0 || end < start) throw new Error(`README.md has no ${name} table`)
  return README.slice(start, end)
}

/** The command paths of one backticked command (words up to its first argument or flag), each alternative expanded. */
export function commandPaths(command: string): string[][] {
  const words: string[][] = []
  for (const word of command.trim().split(/\s+/)) {
    if (!/^[a-z0-9][a-z0-9:\\|-]*$/.test(word)) break
    words.push(word.split('\\|'))
  }
  return words.reduce<string[][]>((paths, alternatives) => paths.flatMap((done) => alternatives.map((word) => [...done, word])), [[]])
}

/** Rows of a markdown table as cells (the header and the rule left out). */
function rows(table: string): string[][] {
  return table
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('|---'))
    .slice(1)
    .map((line) => line.slice(2, -2).split(/(?<!\\) \| /))
}

const spans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!)

/** edgeworkers command ids (`secret:put`) the Commands table lists. */
export function commandsTableIds(): string[] {
  return rows(between('commands')).flatMap(([cell]) => spans(cell!).flatMap((span) => commandPaths(span).map((words) => words.join(':'))))
}

/** For each tool column of the Coming-from table, the command paths it names after the tool's own name. */
export function comingFromCommands(tool: 'wrangler' | 'kubectl' | 'heroku' | 'edgeworkers'): string[][] {
  const column = {wrangler: 1, kubectl: 2, heroku: 3, edgeworkers: 4}[tool]
  return rows(between('coming-from')).flatMap((cells) =>
    spans(cells[column]!)
      .filter((span) => span.startsWith(`${tool} `))
      .flatMap((span) => commandPaths(span.slice(tool.length + 1))),
  )
}
