// `.assetsignore`: gitignore patterns over paths relative to the assets directory, as wrangler reads
// it — `#` comments, `!` re-includes, a trailing `/` matches directories only, a pattern with no
// inner `/` matches a name at any depth, `*` and `?` stay within a segment, `**` crosses them. The
// last matching line decides. wrangler never uploads the rule files themselves.
import {globPattern} from '../../../util/glob.js'
export const ASSETS_IGNORE_FILE = '.assetsignore'
export const ALWAYS_IGNORED: ReadonlySet<string> = new Set([ASSETS_IGNORE_FILE, '_headers', '_redirects'])

interface IgnoreRule {
  negate: boolean
  directoryOnly: boolean
  pattern: RegExp
}

export type IgnoreMatcher = (relativePath: string, isDirectory: boolean) => boolean

export function parseAssetsIgnore(text: string): IgnoreMatcher {
  const rules: IgnoreRule[] = []
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.replace(/(?<!\\)\s+$/, '')
    if (line === '' || line.startsWith('#')) continue
    const negate = line.startsWith('!')
    if (negate) line = line.slice(1)
    const directoryOnly = line.endsWith('/')
    if (directoryOnly) line = line.slice(0, -1)
    const anchored = line.includes('/')
    if (line.startsWith('/')) line = line.slice(1)
    rules.push({negate, directoryOnly, pattern: new RegExp(`^${anchored ? '' : '(?:.*/)?'}${globPattern(line)}$`)})
  }
  return (relativePath, isDirectory) => {
    let ignored = false
    for (const rule of rules) {
      if (rule.directoryOnly && !isDirectory) continue
      if (rule.pattern.test(relativePath)) ignored = !rule.negate
    }
    return ignored
  }
}
