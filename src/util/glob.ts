// A path glob (`*` and `?` within a segment, `**` across them, `\\` escapes) as regular-expression
// source: the one translation .assetsignore and wrangler's module rules share.

/** The regular-expression source matching what `glob` matches (unanchored: callers anchor it). */
export function globPattern(glob: string): string {
  let pattern = ''
  for (let index = 0; index < glob.length; index++) {
    const char = glob[index]!
    if (glob.startsWith('**/', index)) {
      pattern += '(?:.*/)?'
      index += 2
    } else if (glob.startsWith('/**', index) && index + 3 === glob.length) {
      pattern += '/.*'
      index += 2
    } else if (glob.startsWith('**', index)) {
      pattern += '.*'
      index += 1
    } else if (char === '*') pattern += '[^/]*'
    else if (char === '?') pattern += '[^/]'
    else if (char === '\\' && index + 1 < glob.length) pattern += glob[++index]!.replace(/[.+^${}()|[\]\\*?]/g, '\\$&')
    else pattern += char.replace(/[.+^${}()|[\]\\]/g, '\\$&')
  }
  return pattern
}
