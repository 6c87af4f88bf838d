// The README's configuration table, generated from the schema so the two never drift
// (test/unit/config/reference.test.ts compares them; `npm run docs:config` rewrites the README block).
import {envNameFor, leafPaths} from './load.js'
import {settingsSchema} from './schema.js'

export const CONFIG_BLOCK_START = '<!-- config:start -->'
export const CONFIG_BLOCK_END = '<!-- config:end -->'

export function configReferenceTable(): string {
  const defaults = settingsSchema.parse({})
  const rows = leafPaths(defaults).map((dotted) => {
    const value = dotted.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], defaults)
    const shown = dotted === 'data_dir' ? '`$XDG_DATA_HOME/edgeworkers`' : `\`${JSON.stringify(value)}\``
    return `| \`${dotted}\` | ${shown} | \`${envNameFor(dotted)}\` |`
  })
  return ['| key | default | environment |', '|---|---|---|', ...rows].join('\n')
}

/** The README text with its configuration block replaced by the generated table. */
export function withConfigReference(readme: string): string {
  const start = readme.indexOf(CONFIG_BLOCK_START)
  const end = readme.indexOf(CONFIG_BLOCK_END)
  if (start < 0 || end < start) throw new Error('README.md lacks the config:start/config:end markers')
  return `${readme.slice(0, start + CONFIG_BLOCK_START.length)}\n${configReferenceTable()}\n${readme.slice(end)}`
}
