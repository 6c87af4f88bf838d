// "Did you mean …?" for a mistyped name: the closest candidate by edit distance, when it is close
// enough to be a typo (at most a third of the longer word, and never more than 3 edits).

/** Levenshtein distance with one row of memory; inputs here are short names. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({length: b.length + 1}, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/** The candidate a typo most likely meant, or undefined when none is close. Case-insensitive. */
export function didYouMean(typed: string, candidates: Iterable<string>): string | undefined {
  let best: {name: string; distance: number} | undefined
  for (const name of candidates) {
    const distance = editDistance(typed.toLowerCase(), name.toLowerCase())
    if (!best || distance < best.distance) best = {name, distance}
  }
  if (!best) return undefined
  const limit = Math.min(3, Math.max(1, Math.floor(Math.max(typed.length, best.name.length) / 3)))
  return best.distance <= limit ? best.name : undefined
}
