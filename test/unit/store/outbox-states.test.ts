// The outbox state diagram in docs/architecture.md and the code's transition table say the same.
import {readFileSync} from 'node:fs'
import {expect, test} from 'vitest'
import {FINISHED_OUTBOX_STATUSES, OUTBOX_STATUSES, OUTBOX_TRANSITIONS, SETTLED_OUTBOX_STATUSES} from '../../../src/store/index.js'

function diagramEdges(): {moves: string[]; ends: string[]} {
  const doc = readFileSync(new URL('../../../docs/architecture.md', import.meta.url), 'utf8')
  const section = doc.slice(doc.indexOf('## The outbox state machine'))
  const block = /```mermaid\nstateDiagram-v2\n([\s\S]*?)```/.exec(section)?.[1] ?? ''
  const edges = [...block.matchAll(/^\s*(\S+) --> (\S+?)(?::|$)/gm)].map(([, from, to]) => ({from: from!, to: to!}))
  return {
    moves: edges.filter((edge) => edge.to !== '[*]').map((edge) => `${edge.from === '[*]' ? 'new' : edge.from} → ${edge.to}`),
    ends: edges.filter((edge) => edge.to === '[*]').map((edge) => edge.from),
  }
}

test("the diagram in docs/architecture.md draws exactly the code's transitions, and ends at the finished statuses", () => {
  const {moves, ends} = diagramEdges()
  const table = OUTBOX_TRANSITIONS.map((move) => `${move.from} → ${move.to}`)
  expect(new Set(table).size).toBe(table.length)
  expect([...moves].sort()).toEqual([...table].sort())
  expect([...ends].sort()).toEqual([...FINISHED_OUTBOX_STATUSES].sort())
})

test('no transition leaves a finished status, and only operator actions leave a settled one', () => {
  for (const move of OUTBOX_TRANSITIONS) {
    expect(OUTBOX_STATUSES).toContain(move.to)
    expect(FINISHED_OUTBOX_STATUSES as readonly string[]).not.toContain(move.from)
    if ((SETTLED_OUTBOX_STATUSES as readonly string[]).includes(move.from)) expect(move.by).toMatch(/^outbox (retry|cancel)$/)
  }
})
