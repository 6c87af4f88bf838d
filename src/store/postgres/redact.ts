// A PostgreSQL URL safe to print: the password removed. Kept apart from ./open.ts so that naming a
// store does not load the pg driver.
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url)
    parsed.password = ''
    return parsed.toString()
  } catch {
    return 'postgres://(unparseable URL)'
  }
}
