// Driving an Ink view in tests: wait until a frame shows what a step expects (the view refreshes and
// acts asynchronously), and the keys a terminal sends.

export const KEYS = {
  enter: '\r',
  escape: '\u001B',
  tab: '\t',
  shiftTab: '\u001B[Z',
  up: '\u001B[A',
  down: '\u001B[B',
  right: '\u001B[C',
  left: '\u001B[D',
  backspace: '\u007F',
} as const

/** Polls `frame()` until `expected` matches it; fails with the last frame seen after `timeoutMs`. */
export async function waitForFrame(
  frame: () => string | undefined,
  expected: string | RegExp | ((text: string) => boolean),
  timeoutMs = 20_000,
): Promise<string> {
  const matches = (text: string) => (typeof expected === 'string' ? text.includes(expected) : expected instanceof RegExp ? expected.test(text) : expected(text))
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const text = frame() ?? ''
    if (matches(text)) return text
    if (Date.now() > deadline) throw new Error(`no frame matched ${String(expected)} within ${timeoutMs} ms; last frame:\n${text}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
