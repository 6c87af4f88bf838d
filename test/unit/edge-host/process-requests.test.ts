// Who is blamed for a held thread: the oldest request inside, passing over a request whose script
// answered after it entered (a neighbour's request stuck behind the offender, which may be older).
// And which requests are given up at once when the process is stopped as a runaway.
import {afterEach, beforeEach, expect, test, vi} from 'vitest'
import {ProcessRequests} from '../../../src/edge-host/runtime/process-requests.js'

beforeEach(() => {
  vi.useFakeTimers({now: 1_000_000})
})
afterEach(() => {
  vi.useRealTimers()
})

const never = new Promise<never>(() => {})

test('a neighbour that answered after its stuck request entered is passed over for the offender', () => {
  const requests = new ProcessRequests(never)
  requests.enter('victim') // reached workerd just before the offender took the thread
  vi.advanceTimersByTime(1)
  requests.enter('offender')
  vi.advanceTimersByTime(1)
  const {left: answered} = requests.enter('victim')
  vi.advanceTimersByTime(1)
  answered(false) // the victim answered after its stuck request entered
  vi.advanceTimersByTime(600)
  expect(requests.suspect(500)).toBe('offender')
})

test('the oldest request is blamed when no script answered since its requests entered', () => {
  const requests = new ProcessRequests(never)
  requests.enter('first')
  vi.advanceTimersByTime(5)
  requests.enter('second')
  vi.advanceTimersByTime(600)
  expect(requests.suspect(500)).toBe('first')
  // A request younger than the window is not a suspect at all.
  expect(requests.suspect(606)).toBeNull()
})

test('when every request inside belongs to scripts that answered since, the oldest is still blamed', () => {
  const requests = new ProcessRequests(never)
  requests.enter('a')
  vi.advanceTimersByTime(1)
  const {left: other} = requests.enter('a')
  vi.advanceTimersByTime(1)
  other(false)
  vi.advanceTimersByTime(600)
  expect(requests.suspect(500)).toBe('a')
})

test('a script that never answered in the process is blamed before an older request of one that did', () => {
  const requests = new ProcessRequests(never)
  requests.enter('victim').left(false) // the victim has answered before
  vi.advanceTimersByTime(1)
  requests.enter('victim') // stuck, older than the offender's request
  vi.advanceTimersByTime(1)
  requests.enter('offender')
  vi.advanceTimersByTime(600)
  expect(requests.suspect(500)).toBe('offender')
})

test("a process condemned for a runaway gives up its neighbours' requests inside at once, not the offender's nor those that left", () => {
  const requests = new ProcessRequests(never)
  const given: string[] = []
  const enter = (script: string, label: string) => {
    const inside = requests.enter(script)
    inside.abandonable(() => given.push(label))
    return inside
  }
  enter('victim', 'victim inside')
  enter('offender', 'offender inside')
  enter('victim', 'victim answered').left(false)
  enter('victim', 'victim failed').left(true)
  requests.enter('other') // not yet on its way: nothing to give up
  expect(requests.replayable('victim')).toBe(false)
  requests.condemn('offender')
  expect(given).toEqual(['victim inside'])
  expect(requests.replayable('victim')).toBe(true)
  expect(requests.replayable('offender')).toBe(false)
})

test('a process condemned with nobody to blame gives up nothing: no request may be replayed', () => {
  const requests = new ProcessRequests(never)
  const given: string[] = []
  requests.enter('victim').abandonable(() => given.push('victim'))
  requests.condemn(null)
  expect(given).toEqual([])
  expect(requests.replayable('victim')).toBe(false)
})
