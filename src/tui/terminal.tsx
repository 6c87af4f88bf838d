// Terminal building blocks of the Ink views: a block of styled lines, the terminal's size as it
// changes, and state that key handlers read between frames.
import {Box, Text, useStdout} from 'ink'
import {useCallback, useEffect, useRef, useState, type ReactNode} from 'react'
import type {Line} from './panels.js'

export function Lines({lines}: {lines: Line[]}): ReactNode {
  return (
    <Box flexDirection="column">
      {lines.map((line, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: a screen's lines have no identity but their position
        <Text key={i} wrap="truncate" color={line.color} bold={line.bold} inverse={line.inverse}>
          {line.text || ' '}
        </Text>
      ))}
    </Box>
  )
}

/**
 * State the key handler reads as well as renders: keys can arrive faster than frames (a paste, tmux
 * send-keys), so each key must see what the previous one changed, not what was last drawn.
 */
export function useLatest<T>(initial: T): [T, {readonly current: T}, (next: T | ((previous: T) => T)) => void] {
  const [value, setValue] = useState(initial)
  const ref = useRef(initial)
  const set = useCallback((next: T | ((previous: T) => T)) => {
    ref.current = typeof next === 'function' ? (next as (previous: T) => T)(ref.current) : next
    setValue(ref.current)
  }, [])
  return [value, ref, set]
}

export function useTerminalSize(): {columns: number; rows: number} {
  const {stdout} = useStdout()
  const read = useCallback(() => ({columns: stdout.columns || 80, rows: stdout.rows || 24}), [stdout])
  const [size, setSize] = useState(read)
  useEffect(() => {
    const onResize = () => setSize(read())
    stdout.on('resize', onResize)
    return () => {
      stdout.off('resize', onResize)
    }
  }, [stdout, read])
  return size
}
