// Plain-text rendering shared by the inspection commands (their --json output is the raw rows).

/** Left-aligned columns separated by two spaces; `empty` when there are no rows. */
export function table(headers: string[], rows: string[][], empty: string): string {
  if (rows.length === 0) return empty
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? '').length)))
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join('  ')
      .trimEnd()
  return [line(headers), ...rows.map(line)].join('\n')
}

/** Epoch milliseconds as ISO-8601 UTC; `-` for none. */
export function isoTime(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString()
}

/** `key: value` lines, keys aligned. */
export function fields(entries: Array<[string, string]>): string {
  const width = Math.max(...entries.map(([key]) => key.length))
  return entries.map(([key, value]) => `${`${key}:`.padEnd(width + 1)} ${value}`).join('\n')
}
