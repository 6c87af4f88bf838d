// Cap'n Proto text, as workerd configs are written.

/** A Cap'n Proto text literal: quotes and backslashes escaped, control characters as \xHH. */
export function capnpString(value: string): string {
  let out = '"'
  for (const character of value) {
    const code = character.codePointAt(0)!
    if (character === '"' || character === '\\') out += `\\${character}`
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`
    else out += character
  }
  return `${out}"`
}
