// The live `edgeworkers status` view (Ink). Refreshes a snapshot every `intervalMs`; the operator moves
// between panels and rows, drills into rows, filters, and acts (retry, cancel, run one pass of a lane)
// after a confirmation. Everything it knows comes from a StatusSource (src/engine/status/source.ts);
// every failure becomes one line in the view, never a stack trace.
import {useApp, useInput, type Key} from 'ink'
import {useCallback, useEffect, useMemo, useRef, useState, type ReactNode} from 'react'
import type {ActionDone} from '../engine/status/actions.js'
import type {ErrorGroupKey, StatusSource} from '../engine/status/source.js'
import type {StatusSnapshot} from '../engine/status/snapshot.js'
import {LANE_NAMES, type LaneName} from '../engine/pass/lane.js'
import {renderTailLine} from '../cli/tail-render.js'
import {parseFilter, type RowFilter} from './filter.js'
import {Lines, useLatest, useTerminalSize} from './terminal.js'
import {clip, firstLineOf, formatInterval, shortId, wrap} from './format.js'
import {groupRowsList, panelList, visibleItems, type ListItem, type OpenTarget, type PanelList} from './lists.js'
import {attentionLines, headerLine, hostLines, lanesLines, openingPanel, PANELS, type Line, type PanelName} from './panels.js'
import {bottomLines, errorLines, keysLine, screenLines, type Frame, type Message, type Overlay, type Screen} from './screens.js'
import {ViewErrorBoundary} from './view-error.js'

/** Below this the view shows only a message asking for a bigger terminal. */
export const MIN_COLUMNS = 60
export const MIN_ROWS = 14

const NOTHING_SELECTED: Record<PanelName, number> = {leased: 0, attention: 0, workers: 0, retirements: 0, audit: 0}

export interface StatusAppProps {
  source: StatusSource
  intervalMs: number
}

/** Lines a tail screen keeps. */
const TAIL_LINES_KEPT = 500

export function StatusApp(props: StatusAppProps): ReactNode {
  return (
    <ViewErrorBoundary>
      <StatusView {...props} />
    </ViewErrorBoundary>
  )
}

function StatusView({source, intervalMs}: StatusAppProps): ReactNode {
  const {exit} = useApp()
  const {columns, rows} = useTerminalSize()
  const [snapshot, setSnapshot] = useState<StatusSnapshot | null>(null)
  const [refreshError, setRefreshError] = useState<string | null>(null)
  const [panel, setPanel] = useState<PanelName>('leased')
  const [selected, setSelected] = useState<Record<PanelName, number>>(NOTHING_SELECTED)
  const [screens, screensRef, setScreens] = useLatest<Screen[]>([])
  const [overlay, overlayRef, setOverlay] = useLatest<Overlay | null>(null)
  const [filter, filterRef, setFilter] = useLatest<RowFilter | null>(null)
  const [message, setMessage] = useState<Message | null>(null)
  const [busy, busyRef, setBusy] = useLatest<string | null>(null)
  const mounted = useRef(true)
  const refreshing = useRef(false)
  /** The view opens once on the panel that shows what needs attention, then the operator moves it. */
  const panelChosen = useRef(false)
  /** Quitting stops a pass the view started (between rows: a row in flight is finished, never cut). */
  const stopActions = useRef(new AbortController())

  /** Reloads the snapshot, and whatever the open screen shows. Never two at once. */
  // biome-ignore lint/correctness/useExhaustiveDependencies: reads the open screen through refs on purpose; recreating it would restart the refresh timer
  const refresh = useCallback(async () => {
    if (refreshing.current) return
    refreshing.current = true
    try {
      const next = await source.snapshot()
      if (!mounted.current) return
      if (!panelChosen.current) {
        panelChosen.current = true
        setPanel(openingPanel(next))
      }
      setSnapshot(next)
      setRefreshError(null)
    } catch (error) {
      if (mounted.current) setRefreshError(firstLineOf(error))
    }
    const top = screensRef.current.at(-1)
    if (top?.kind === 'group') await loadGroup(top.group)
    if (top?.kind === 'row') await loadRow(top.id)
    refreshing.current = false
  }, [source])

  const replaceTop = (update: (screen: Screen) => Screen | null) =>
    setScreens((stack) => {
      const top = stack.at(-1)
      if (!top) return stack
      const next = update(top)
      return next ? [...stack.slice(0, -1), next] : stack
    })

  async function loadGroup(group: ErrorGroupKey): Promise<void> {
    try {
      const groupRows = await source.groupRows(group)
      if (mounted.current)
        replaceTop((top) =>
          top.kind === 'group' && top.group === group
            ? {...top, rows: groupRows, error: null, selected: Math.min(top.selected, Math.max(0, groupRows.length - 1))}
            : null,
        )
    } catch (error) {
      if (mounted.current) replaceTop((top) => (top.kind === 'group' && top.group === group ? {...top, error: firstLineOf(error)} : null))
    }
  }

  async function loadRow(id: string): Promise<void> {
    try {
      const detail = await source.outboxRow(id)
      if (mounted.current) replaceTop((top) => (top.kind === 'row' && top.id === id ? {...top, detail, error: null} : null))
    } catch (error) {
      if (mounted.current) replaceTop((top) => (top.kind === 'row' && top.id === id ? {...top, error: firstLineOf(error)} : null))
    }
  }

  useEffect(() => {
    mounted.current = true
    void refresh()
    const timer = setInterval(() => void refresh(), intervalMs)
    return () => {
      mounted.current = false
      clearInterval(timer)
    }
  }, [refresh, intervalMs])
  useEffect(() => () => stopActions.current.abort(), [])

  const openTail = (script: string) => {
    const stop = new AbortController()
    const signal = AbortSignal.any([stop.signal, stopActions.current.signal])
    const update = (change: (screen: Extract<Screen, {kind: 'tail'}>) => Screen) =>
      mounted.current && setScreens((stack) => stack.map((screen) => (screen.kind === 'tail' && screen.stop === stop ? change(screen) : screen)))
    setScreens((stack) => [...stack, {kind: 'tail', script, lines: [], notice: 'connecting…', stop}])
    source
      .tail(
        script,
        signal,
        (line) => update((screen) => ({...screen, notice: null, lines: [...screen.lines, ...renderTailLine(line, false).split('\n')].slice(-TAIL_LINES_KEPT)})),
        (notice) => update((screen) => ({...screen, notice: notice.kind === 'tailing' ? 'waiting for requests…' : `reconnecting: ${notice.reason}`})),
      )
      .catch((error: unknown) => update((screen) => ({...screen, notice: `tail ended: ${firstLineOf(error)}`})))
  }

  const back = () =>
    setScreens((stack) => {
      const leaving = stack.at(-1)
      if (leaving?.kind === 'tail') leaving.stop.abort()
      return stack.slice(0, -1)
    })

  const top = screens.at(-1)
  const list: PanelList | null = useMemo(() => {
    if (top?.kind === 'group') return top.rows ? groupRowsList(top.rows, Date.parse(snapshot?.takenAt ?? new Date().toISOString())) : null
    if (top) return null
    return snapshot ? panelList(panel, snapshot) : null
  }, [top, snapshot, panel])
  const items: ListItem[] = list ? visibleItems(list, filter) : []
  const selectedIndex = top?.kind === 'group' ? top.selected : selected[panel]
  const current: ListItem | undefined = items[Math.min(selectedIndex, items.length - 1)]
  /** The outbox row r/c act on: the selected row of a list, or the row on screen. */
  const actionRow = top?.kind === 'row' ? top.id : current?.outboxId

  const open = (target: OpenTarget) => {
    if (target.kind === 'group') {
      setScreens((stack) => [...stack, {kind: 'group', group: target.group, rows: null, error: null, selected: 0}])
      void loadGroup(target.group)
    } else if (target.kind === 'row') {
      setScreens((stack) => [...stack, {kind: 'row', id: target.id, detail: undefined, error: null, scroll: 0}])
      void loadRow(target.id)
    } else {
      setScreens((stack) => [...stack, {kind: 'fields', title: target.title, lines: target.lines, scroll: 0}])
    }
  }

  const move = (delta: number) => {
    if (top?.kind === 'tail') return
    if (top?.kind === 'row' || top?.kind === 'fields') {
      replaceTop((screen) => (screen.kind === 'row' || screen.kind === 'fields' ? {...screen, scroll: Math.max(0, screen.scroll + delta)} : null))
      return
    }
    const clamp = (index: number) => Math.max(0, Math.min(items.length - 1, index + delta))
    if (top?.kind === 'group') replaceTop((screen) => (screen.kind === 'group' ? {...screen, selected: clamp(screen.selected)} : null))
    else setSelected((all) => ({...all, [panel]: clamp(Math.min(all[panel], Math.max(0, items.length - 1)))}))
  }

  const confirm = (prompt: string, busyText: string, run: () => Promise<ActionDone>) => setOverlay({kind: 'confirm', prompt, busy: busyText, run})

  const runAction = async (overlayAction: Extract<Overlay, {kind: 'confirm'}>) => {
    setOverlay(null)
    setBusy(overlayAction.busy)
    setMessage(null)
    try {
      const done = await overlayAction.run()
      if (mounted.current) setMessage({tone: 'ok', text: done.message})
    } catch (error) {
      if (mounted.current) setMessage({tone: 'error', text: firstLineOf(error)})
    }
    if (mounted.current) setBusy(null)
    await refresh()
  }

  const describeRow = (id: string) => {
    const known = snapshot?.leased.find((row) => row.id === id) ?? (top?.kind === 'group' ? top.rows?.find((row) => row.id === id) : undefined)
    const detail = top?.kind === 'row' && top.detail ? top.detail : undefined
    const operation = known?.operation ?? detail?.operation
    const subject = known?.department_id ?? detail?.department_id ?? known?.script_name ?? detail?.script_name
    return `outbox row ${shortId(id)}${operation ? ` (${operation}${subject ? ` ${clip(subject, 20)}` : ''})` : ''}`
  }

  // Ink re-subscribes an input handler only after the render's effects run; a key arriving in
  // between must still see the state that was just drawn, so the handler is read through a ref.
  const onInput = useRef<(input: string, key: Key) => void>(() => {})
  useInput(
    useCallback((input: string, key: Key) => {
      // A paste, or tmux send-keys, can bring several keys in one chunk: each is handled on its own.
      if (input.length > 1 && !key.ctrl && !key.meta) {
        const plain = Object.fromEntries(Object.keys(key).map((name) => [name, false])) as unknown as Key
        for (const char of input) onInput.current(char, char === '\r' || char === '\n' ? {...plain, return: true} : plain)
        return
      }
      onInput.current(input, key)
    }, []),
  )
  onInput.current = (input: string, key: Key) => {
    const overlay = overlayRef.current
    const top = screensRef.current.at(-1)
    if (overlay?.kind === 'filter') {
      if (key.escape) setOverlay(null)
      else if (key.return) {
        const parsed = parseFilter(overlay.text)
        if (parsed.ok) {
          setFilter(parsed.filter)
          setSelected(NOTHING_SELECTED)
          replaceTop((screen) => (screen.kind === 'group' ? {...screen, selected: 0} : null))
          setMessage(parsed.filter ? {tone: 'info', text: `filter: ${parsed.filter.source}`} : {tone: 'info', text: 'filter cleared'})
          setOverlay(null)
        } else {
          setOverlay({...overlay, error: parsed.error})
        }
      } else if (key.backspace || key.delete) setOverlay({kind: 'filter', text: overlay.text.slice(0, -1)})
      // biome-ignore lint/suspicious/noControlCharactersInRegex: typed control characters are dropped from the filter
      else if (input && !key.ctrl && !key.meta && !key.tab) setOverlay({kind: 'filter', text: overlay.text + input.replace(/[\u0000-\u001f\u007f]/g, '')})
      return
    }
    if (input === 'q' || (key.ctrl && input === 'c')) {
      exit()
      return
    }
    if (overlay?.kind === 'help') {
      setOverlay(null)
      return
    }
    if (overlay?.kind === 'confirm') {
      if (input === 'y' || input === 'Y') void runAction(overlay)
      else {
        setOverlay(null)
        setMessage({tone: 'info', text: 'nothing done'})
      }
      return
    }
    if (overlay?.kind === 'lanes') {
      const lane = LANE_NAMES[Number(input) - 1] as LaneName | undefined
      if (lane) confirm(`Run one ${lane} pass now?`, `running one ${lane} pass…`, () => source.runLane(lane, stopActions.current.signal))
      else setOverlay(null)
      return
    }
    if (busyRef.current) return
    if (input === '?') setOverlay({kind: 'help'})
    else if (input === '/') setOverlay({kind: 'filter', text: filterRef.current?.source ?? ''})
    else if (input === 'p') setOverlay({kind: 'lanes'})
    else if (key.escape || key.backspace || key.delete) back()
    else if (input === 't' && !top && current?.tailScript) openTail(current.tailScript)
    else if (input === 'b' && !top && current?.rollbackDepartment) {
      const department = current.rollbackDepartment
      confirm(`Roll the Worker of ${clip(department, 30)} back to the version served before?`, `rolling back ${clip(department, 30)}…`, () =>
        source.rollback(department),
      )
    } else if (key.upArrow || input === 'k') move(-1)
    else if (key.downArrow || input === 'j') move(1)
    else if (key.pageUp) move(-10)
    else if (key.pageDown) move(10)
    else if (!top && (key.tab || key.rightArrow || key.leftArrow || input === 'l' || input === 'h')) {
      const step = key.leftArrow || input === 'h' || (key.tab && key.shift) ? -1 : 1
      panelChosen.current = true
      setPanel((shown) => PANELS[(PANELS.indexOf(shown) + step + PANELS.length) % PANELS.length]!)
    } else if (key.return && current?.open && top?.kind !== 'row' && top?.kind !== 'fields') open(current.open)
    else if ((input === 'r' || input === 'c') && actionRow) {
      const id = actionRow
      if (input === 'r') confirm(`Retry ${describeRow(id)} now?`, `retrying ${shortId(id)}…`, () => source.retry(id))
      else confirm(`Cancel ${describeRow(id)}? No lane will take it again.`, `cancelling ${shortId(id)}…`, () => source.cancel(id))
    } else if (input === 'r' || input === 'c') setMessage({tone: 'info', text: 'select an outbox row first (Leased panel, or a failed/uncertain group)'})
  }

  if (columns < MIN_COLUMNS || rows < MIN_ROWS) {
    return (
      <Lines
        lines={[
          {text: clip(`terminal too small: ${columns}×${rows}`, columns), color: 'red', bold: true},
          {text: clip(`edgeworkers status needs at least ${MIN_COLUMNS}×${MIN_ROWS}`, columns)},
          {text: clip('enlarge the window, or press q to quit', columns)},
        ]}
      />
    )
  }

  // One line short of the terminal: a frame as tall as the screen makes Ink clear it on every draw.
  const height = rows - 1
  const lines: Line[] = [headerLine(snapshot, intervalMs, columns)]
  const frame: Frame = {columns, panel, top, overlay, filter, list, items, panelSelected: selected[panel], busy, message}
  const footer: Line[] = [...bottomLines(frame), keysLine(frame)]

  if (!snapshot) {
    lines.push(
      ...(refreshError
        ? errorLines(`store unavailable: ${refreshError}`, columns, true)
        : [{text: 'reading the store and the edge host…', color: 'gray' as const}]),
    )
    if (refreshError)
      lines.push(
        ...wrap(`retrying every ${formatInterval(intervalMs)}; the host is read once the store answers (its pairing is there)`, columns, 2).map((text) => ({
          text,
        })),
      )
  } else {
    if (refreshError) lines.push(...errorLines(`store unavailable: ${refreshError} — showing the snapshot of ${snapshot.takenAt}`, columns, true))
    lines.push(...hostLines(snapshot, columns), ...attentionLines(snapshot, columns))
    // A drill-in screen needs the room more than the lanes table.
    if (!top || top.kind === 'group') lines.push(...lanesLines(snapshot, columns))
    const room = height - lines.length - footer.length - 1
    lines.push(...screenLines(frame, snapshot, room))
  }
  while (lines.length < height - footer.length) lines.push({text: ''})
  return <Lines lines={[...lines.slice(0, height - footer.length), ...footer]} />
}
