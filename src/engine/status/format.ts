// Durations as the status snapshot's lines and the view's cells say them.

/** 24h, 7d, 90m: the finished-rows window as a heading says it. */
export function formatWindow(seconds: number): string {
  if (seconds % 3600 === 0 && seconds <= 48 * 3600) return `${seconds / 3600}h`
  if (seconds % 86_400 === 0) return `${seconds / 86_400}d`
  if (seconds % 60 === 0) return `${seconds / 60}m`
  return formatDuration(seconds * 1000)
}

/** 42s, 5m03s, 2h07m, 3d04h: short enough for a table cell. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000))
  if (seconds < 60) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, '0')}s`
  const hours = Math.floor(minutes / 60)
  if (hours < 24) return `${hours}h${String(minutes % 60).padStart(2, '0')}m`
  return `${Math.floor(hours / 24)}d${String(hours % 24).padStart(2, '0')}h`
}
