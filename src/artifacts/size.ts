// The one wording for "this artifact is over its size limit", shared by the build, the artifact
// store and the integrity check so an operator always reads the same line.
const KiB = 1024
const MiB = 1024 * KiB

export function formatByteSize(bytes: number): string {
  if (bytes >= MiB) return `${trimmed(bytes / MiB)} MiB`
  if (bytes >= KiB) return `${trimmed(bytes / KiB)} KiB`
  return `${bytes} bytes`
}

/** e.g. `project archive is 2.3 MiB; the limit is 2 MiB`. */
export function overLimitMessage(what: string, size: number, limit: number): string {
  let shownSize = formatByteSize(size)
  let shownLimit = formatByteSize(limit)
  // Rounding can make a size just over the limit print the same as the limit; show exact bytes then.
  if (shownSize === shownLimit) {
    shownSize = `${size} bytes`
    shownLimit = `${limit} bytes`
  }
  return `${what} is ${shownSize}; the limit is ${shownLimit}`
}

function trimmed(value: number): string {
  return value.toFixed(1).replace(/\.0$/, '')
}
