// The one parser for JSON that arrives from outside the process (manifests, lock files, config
// files, management API bodies). JSON.parse accepts three things we refuse:
// - invalid UTF-8, silently turned into U+FFFD (a stored manifest would differ from the file);
// - duplicate keys, the last one winning (two readers of one document could disagree on `main`);
// - unbounded nesting, which later recursive code (schema checks, canonical digests) turns into a
//   stack overflow — a 500 on the host, "Maximum call stack size exceeded" in the CLI.
// Each refusal names the byte offset or the key. Otherwise the result equals JSON.parse's.

/** Nesting deeper than this is refused; no document of ours comes close. */
export const MAX_JSON_DEPTH = 64

export class StrictJsonError extends Error {}

export interface StrictJsonOptions {
  maxDepth?: number
}

const fatalDecoder = new TextDecoder('utf-8', {fatal: true, ignoreBOM: true})

/** Parses UTF-8 bytes (or an already-decoded string) as JSON, refusing what the header lists. */
export function parseStrictJson(input: Uint8Array | string, options: StrictJsonOptions = {}): unknown {
  const text = typeof input === 'string' ? input : decodeUtf8(input)
  return new Parser(text, options.maxDepth ?? MAX_JSON_DEPTH).document()
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return fatalDecoder.decode(bytes)
  } catch {
    throw new StrictJsonError(`invalid UTF-8 at byte offset ${invalidUtf8Offset(bytes)}`)
  }
}

/** The offset of the first byte that is not valid UTF-8, or null when all of it is. */
export function firstInvalidUtf8Offset(bytes: Uint8Array): number | null {
  try {
    fatalDecoder.decode(bytes)
    return null
  } catch {
    return invalidUtf8Offset(bytes)
  }
}

/** The offset of the first byte that does not start or continue a valid UTF-8 sequence. */
function invalidUtf8Offset(bytes: Uint8Array): number {
  let index = 0
  while (index < bytes.length) {
    const lead = bytes[index]!
    const length = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0
    if (length === 0 || index + length > bytes.length) return index
    try {
      fatalDecoder.decode(bytes.subarray(index, index + length))
    } catch {
      return index
    }
    index += length
  }
  return index
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d])
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y

class Parser {
  private index = 0

  constructor(
    private readonly text: string,
    private readonly maxDepth: number,
  ) {}

  document(): unknown {
    const value = this.value(0, '')
    this.skipWhitespace()
    if (this.index < this.text.length) this.fail('unexpected data after the JSON value')
    return value
  }

  private value(depth: number, where: string): unknown {
    this.skipWhitespace()
    const code = this.text.charCodeAt(this.index)
    if (code === 0x7b /* { */ || code === 0x5b /* [ */) {
      if (depth >= this.maxDepth) this.fail(`nesting deeper than ${this.maxDepth} levels`)
      return code === 0x7b ? this.object(depth + 1, where) : this.array(depth + 1, where)
    }
    if (code === 0x22 /* " */) return this.string()
    if (this.text.startsWith('true', this.index)) return this.literal(4, true)
    if (this.text.startsWith('false', this.index)) return this.literal(5, false)
    if (this.text.startsWith('null', this.index)) return this.literal(4, null)
    NUMBER.lastIndex = this.index
    const number = NUMBER.exec(this.text)
    if (number) {
      this.index += number[0].length
      return Number(number[0])
    }
    return this.fail(this.index >= this.text.length ? 'unexpected end of JSON' : 'unexpected character')
  }

  private object(depth: number, where: string): Record<string, unknown> {
    this.index++ // {
    const result: Record<string, unknown> = {}
    const seen = new Set<string>()
    this.skipWhitespace()
    if (this.text.charCodeAt(this.index) === 0x7d) {
      this.index++
      return result
    }
    for (;;) {
      this.skipWhitespace()
      if (this.text.charCodeAt(this.index) !== 0x22) this.fail('expected a key')
      const keyOffset = this.index
      const key = this.string()
      const path = where ? `${where}.${key}` : key
      if (seen.has(key)) this.fail(`duplicate key ${JSON.stringify(path)}`, keyOffset)
      seen.add(key)
      this.skipWhitespace()
      if (this.text.charCodeAt(this.index) !== 0x3a) this.fail('expected ":"')
      this.index++
      // defineProperty: a key named __proto__ is data, as with JSON.parse.
      Object.defineProperty(result, key, {value: this.value(depth, path), enumerable: true, writable: true, configurable: true})
      this.skipWhitespace()
      const next = this.text.charCodeAt(this.index++)
      if (next === 0x7d) return result
      if (next !== 0x2c) this.fail('expected "," or "}"', this.index - 1)
    }
  }

  private array(depth: number, where: string): unknown[] {
    this.index++ // [
    const result: unknown[] = []
    this.skipWhitespace()
    if (this.text.charCodeAt(this.index) === 0x5d) {
      this.index++
      return result
    }
    for (;;) {
      result.push(this.value(depth, `${where}[${result.length}]`))
      this.skipWhitespace()
      const next = this.text.charCodeAt(this.index++)
      if (next === 0x5d) return result
      if (next !== 0x2c) this.fail('expected "," or "]"', this.index - 1)
    }
  }

  /** A string token: found by scanning, decoded by JSON.parse (which checks escapes and controls). */
  private string(): string {
    const start = this.index
    let end = start + 1
    for (;;) {
      const quote = this.text.indexOf('"', end)
      if (quote === -1) this.fail('unterminated string', start)
      let backslashes = 0
      while (this.text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++
      end = quote + 1
      if (backslashes % 2 === 0) break
    }
    this.index = end
    try {
      return JSON.parse(this.text.slice(start, end)) as string
    } catch {
      return this.fail('invalid string', start)
    }
  }

  private literal<T>(length: number, value: T): T {
    this.index += length
    return value
  }

  private skipWhitespace(): void {
    while (WHITESPACE.has(this.text.charCodeAt(this.index))) this.index++
  }

  private fail(what: string, at = this.index): never {
    throw new StrictJsonError(`${what} at offset ${at}`)
  }
}
